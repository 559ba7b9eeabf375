# Sourced by tests/interop/run.sh, tests/wrap/run.sh and tests/scale/run.sh: the one Python venv
# they share, holding the official MCP Python SDK pinned in tests/interop/python/requirements.txt.
# It is made once and reused while that file is unchanged (a stamp beside it holds the file's
# SHA-256) and while the modules the three scripts import load.

# interop_venv VENV: makes or reuses the venv at VENV with $PYTHON (default python3.11, else
# python3); prints what it did; exits 1 if the venv cannot be made.
interop_venv() {
    local venv="$1" python="${PYTHON:-}"
    local here reqs stamp want version
    here="$(dirname "${BASH_SOURCE[0]}")"
    reqs="$here/python/requirements.txt"
    stamp="$venv/.interop-requirements.sha256"
    if [[ -z "$python" ]]; then
        if command -v python3.11 >/dev/null 2>&1; then python=python3.11; else python=python3; fi
    fi
    # Everything the three scripts import, so a venv one of them made serves the others.
    local imports='import mcp, mcp.client.session, mcp.client.stdio, mcp.client.streamable_http, mcp.client.subscriptions, jsonschema'
    version='import importlib.metadata as m; print("mcp", m.version("mcp"))'
    want="$(sha256sum "$reqs" | cut -d' ' -f1)"
    if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
        && "$venv/bin/python" -c "$imports" >/dev/null 2>&1; then
        printf '==> python: reusing venv %s (%s)\n' "$venv" "$("$venv/bin/python" -c "$version")"
        return 0
    fi
    printf '==> python: creating venv %s with %s (%s)\n' "$venv" "$python" "$("$python" --version 2>&1)"
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    if ! "$python" -m venv "$venv"; then
        printf "python: error: '%s -m venv' failed (on Debian: apt-get install python3-venv)\n" "$python" >&2
        exit 1
    fi
    "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --quiet -r "$reqs"
    "$venv/bin/python" -c "$imports"
    printf '%s\n' "$want" >"$stamp"
    printf '==> python: installed %s\n' "$("$venv/bin/python" -c "$version")"
}

#!/usr/bin/env bash
# Interop check: the official MCP client SDKs (Python `mcp`, TypeScript
# `@modelcontextprotocol/sdk`) against our example servers, over stdio and over
# Streamable HTTP.
#
# Usage: bash tests/interop/run.sh [TOKIO_BINARY [SMOL_BINARY]]
#   defaults (relative to the repo root):
#     target/release/examples/everything        (mcp-tokio)
#     target/release/examples/everything-smol   (mcp-smol)
#
# Builds nothing; build the binaries first, e.g.
#   cargo build --release -p mcp-tokio --example everything -p mcp-smol --example everything-smol
#
# Environment:
#   PYTHON           interpreter for the venv (default: python3.11 if found, else python3)
#   INTEROP_TIMEOUT  per-step timeout inside each client, seconds (default 30)
#   INTEROP_NOTIFY_TIMEOUT  how long a client waits for an expected server
#                    notification, seconds (default 5)
#   INTEROP_MODERN=1 also run the Python client's 2026-07-28 (server/discover) session
#   INTEROP_HTTP=0   skip the Streamable HTTP runs (direct and compact)
#   INTEROP_ADMIN=0  skip the admin pass (see below)
#   INTEROP_COMPACT=0  skip the compact-mode passes (see below)
#
# Runs each client (Python, TypeScript) against each binary:
#   stdio  the client spawns BINARY and talks over its stdin/stdout, as an
#          anonymous caller (the gated admin_echo tool and test://admin-secret
#          resource must be hidden);
#   http   the client starts `BINARY --http 127.0.0.1:0`, reads the URL from the
#          server's `listening on http://HOST:PORT/mcp` stderr line, connects with
#          the SDK's Streamable HTTP client transport and kills the server at the
#          end (HTTP callers are anonymous too);
#   admin  stdio again, with the server started as `BINARY --role admin` and the
#          client given --admin (the gated items must be visible and work);
#          `--role` applies to stdio only, so there is no HTTP admin pass;
#   compact-stdio, compact-http
#          the server started with `--mode compact`, over stdio and over HTTP as
#          above, driven by the compact clients (python/compact.py, ts/compact.mjs).
# Every direct run (stdio, http, admin) checks the catalogue (tools, resources,
# templates, prompts, completion), error handling, gating, progress, logging and list_changed /
# resources/updated notifications, and the interactions: the client declares
# sampling and elicitation and answers test_sampling's sampling/createMessage and
# test_elicitation's elicitation/create through the SDK's handlers. The compact
# passes check that tools/list is exactly search_tools, get_tool_details and
# call_tool (input schemas, no outputSchema), search_tools' ranking and limit,
# get_tool_details, and call_tool's results and value/failure envelopes
# (`unavailable`, `invalid_arguments`), all through the SDKs' own client API.
#
# Side effects: Python venv in target/interop/venv, npm packages in
# tests/interop/ts/node_modules (both reused when up to date), logs in
# target/interop/logs/. Exits non-zero if any run fails: 20 runs (2 clients x
# 2 binaries x 5 passes); INTEROP_ADMIN=0 drops 4, INTEROP_HTTP=0 drops 8 (http and
# compact-http), INTEROP_COMPACT=0 drops 8 (compact-stdio and compact-http).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$(pwd)"

TOKIO_BIN="${1:-target/release/examples/everything}"
SMOL_BIN="${2:-target/release/examples/everything-smol}"
INTEROP_DIR="$ROOT/tests/interop"
WORK="$ROOT/target/interop"
VENV="$WORK/venv"
LOGS="$WORK/logs"
RUN_TIMEOUT="${INTEROP_RUN_TIMEOUT:-300}" # hard cap per client run, seconds

log() { printf '==> %s\n' "$*"; }
die() { printf 'interop: error: %s\n' "$*" >&2; exit 1; }

abspath() {
    case "$1" in
        /*) printf '%s\n' "$1" ;;
        *) printf '%s\n' "$ROOT/$1" ;;
    esac
}

sha() { sha256sum "$1" | cut -d' ' -f1; }

# ---- binaries --------------------------------------------------------------
declare -a BIN_NAMES=() BIN_PATHS=()
for spec in "tokio=$TOKIO_BIN" "smol=$SMOL_BIN"; do
    name="${spec%%=*}"
    path="$(abspath "${spec#*=}")"
    [[ -x "$path" ]] || die "server binary for $name not found or not executable: $path
  (build it first: cargo build --release -p mcp-tokio --example everything -p mcp-smol --example everything-smol)"
    BIN_NAMES+=("$name")
    BIN_PATHS+=("$path")
done

mkdir -p "$WORK" "$LOGS"
rm -f "$LOGS"/*.log # this run's logs only

# ---- Python venv -------------------------------------------------------------
# shellcheck source=tests/interop/venv.sh
source "$INTEROP_DIR/venv.sh"
interop_venv "$VENV"

# ---- npm ---------------------------------------------------------------------
TS_DIR="$INTEROP_DIR/ts"
NPM_STAMP="$TS_DIR/node_modules/.interop-lock.sha256"
want="$(sha "$TS_DIR/package-lock.json")"
if [[ -f "$NPM_STAMP" && "$(cat "$NPM_STAMP")" == "$want" \
    && -f "$TS_DIR/node_modules/@modelcontextprotocol/sdk/package.json" ]]; then
    log "ts: reusing $TS_DIR/node_modules"
else
    log "ts: npm ci (node $(node --version), npm $(npm --version))"
    (cd "$TS_DIR" && npm ci --no-audit --no-fund --loglevel=error)
    printf '%s\n' "$want" >"$NPM_STAMP"
fi

# ---- runs ----------------------------------------------------------------------
PY_ARGS=()
[[ "${INTEROP_MODERN:-0}" == "1" ]] && PY_ARGS+=(--modern)

declare -a RESULTS=()
failures=0

run_one() { # client-label binary-label binary-path mode(stdio|http|admin|compact-stdio|compact-http) client-command...
    local client="$1" bname="$2" bpath="$3" mode="$4"
    shift 4
    local -a client_opts=() server_args=()
    local label="$client x $bname ($mode)"
    case "$mode" in
        http) client_opts=(--http) ;;
        admin)
            client_opts=(--admin)
            server_args=(--role admin)
            label="$client x $bname (stdio, --role admin)"
            ;;
        compact-stdio)
            server_args=(--mode compact)
            label="$client x $bname (stdio, --mode compact)"
            ;;
        compact-http)
            client_opts=(--http)
            server_args=(--mode compact)
            label="$client x $bname (http, --mode compact)"
            ;;
    esac
    local logf="$LOGS/$client-$bname-$mode.log" rc=0 start=$SECONDS summary
    log "$client client vs $bname server, $mode ($bpath ${server_args[*]})"
    # `timeout` signals its whole process group, so a server a client started dies with it.
    timeout --kill-after=10 "$RUN_TIMEOUT" "$@" "${client_opts[@]}" "$bpath" "${server_args[@]}" 2>&1 \
        | tee "$logf" || rc=$?
    summary="$(grep -E "^interop-(python|ts): [0-9]+ passed, [0-9]+ failed$" "$logf" | tail -n1 || true)"
    if [[ $rc -eq 0 && -z "$summary" ]]; then
        rc=1 # the client must always end with its summary line
    fi
    [[ $rc -eq 124 || $rc -eq 137 ]] && summary="timed out after ${RUN_TIMEOUT}s"
    if [[ $rc -eq 0 ]]; then
        RESULTS+=("PASS  $label  (${summary:-?}; $((SECONDS - start))s)")
    else
        failures=$((failures + 1))
        RESULTS+=("FAIL  $label  (${summary:-no summary line}; exit $rc; $((SECONDS - start))s; log: ${logf#"$ROOT"/})")
    fi
}

MODES=(stdio)
[[ "${INTEROP_HTTP:-1}" == "0" ]] || MODES+=(http)
[[ "${INTEROP_ADMIN:-1}" == "0" ]] || MODES+=(admin)
if [[ "${INTEROP_COMPACT:-1}" != "0" ]]; then
    MODES+=(compact-stdio)
    [[ "${INTEROP_HTTP:-1}" == "0" ]] || MODES+=(compact-http)
fi

for mode in "${MODES[@]}"; do
    py_client="$INTEROP_DIR/python/client.py" ts_client="$TS_DIR/client.mjs"
    if [[ "$mode" == compact-* ]]; then
        py_client="$INTEROP_DIR/python/compact.py" ts_client="$TS_DIR/compact.mjs"
    fi
    for i in "${!BIN_NAMES[@]}"; do
        run_one python "${BIN_NAMES[$i]}" "${BIN_PATHS[$i]}" "$mode" \
            "$VENV/bin/python" "$py_client" "${PY_ARGS[@]}"
        run_one ts "${BIN_NAMES[$i]}" "${BIN_PATHS[$i]}" "$mode" \
            node "$ts_client"
    done
done

echo
log "interop summary"
printf '    %s\n' "${RESULTS[@]}"
if [[ $failures -ne 0 ]]; then
    echo "interop: $failures of ${#RESULTS[@]} runs FAILED"
    exit 1
fi
echo "interop: all ${#RESULTS[@]} runs passed"

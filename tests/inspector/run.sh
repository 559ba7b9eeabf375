#!/usr/bin/env bash
# The MCP Inspector's CLI mode (`@modelcontextprotocol/inspector --cli`, pinned in package.json)
# against both example servers, over stdio and over Streamable HTTP: lists and calls tools, reads
# a resource and gets a prompt, as a user checking a server with the Inspector would.
#
# Usage: bash tests/inspector/run.sh [TOKIO_BINARY [SMOL_BINARY]]
#   defaults (relative to the repo root):
#     target/debug/examples/everything        (mcp-tokio)
#     target/debug/examples/everything-smol   (mcp-smol)
#
# Builds nothing; build the binaries first:
#   cargo build -p mcp-tokio --example everything -p mcp-smol --example everything-smol
#
# Each check runs one Inspector command and passes when it exits 0 and its output contains an
# expected string (each server runs with its defaults; the expectations are the `everything`
# example's fixtures). For HTTP, the server is started as `BINARY --http 127.0.0.1:0` and the
# URL read from its `listening on http://HOST:PORT/mcp` stderr line; one server serves all four
# checks, then is stopped.
#
# Environment:
#   INSPECTOR_TIMEOUT  seconds one Inspector command may take (default 60)
#
# Side effects: npm packages in tests/inspector/node_modules (reused while package-lock.json is
# unchanged), the Inspector's catalog file and logs in target/inspector/. Exits non-zero if any
# of the 16 checks fails, and prints the output of each that did.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$(pwd)"

TOKIO_BIN="${1:-target/debug/examples/everything}"
SMOL_BIN="${2:-target/debug/examples/everything-smol}"
DIR="$ROOT/tests/inspector"
WORK="$ROOT/target/inspector"
LOGS="$WORK/logs"
TIMEOUT="${INSPECTOR_TIMEOUT:-60}"

log() { printf '==> %s\n' "$*"; }
die() { printf 'inspector: error: %s\n' "$*" >&2; exit 1; }

abspath() {
    case "$1" in
        /*) printf '%s\n' "$1" ;;
        *) printf '%s\n' "$ROOT/$1" ;;
    esac
}

declare -a BIN_NAMES=() BIN_PATHS=()
for spec in "tokio=$TOKIO_BIN" "smol=$SMOL_BIN"; do
    path="$(abspath "${spec#*=}")"
    [[ -x "$path" ]] || die "server binary for ${spec%%=*} not found or not executable: $path
  (build it first: cargo build -p mcp-tokio --example everything -p mcp-smol --example everything-smol)"
    BIN_NAMES+=("${spec%%=*}")
    BIN_PATHS+=("$path")
done

mkdir -p "$LOGS"
rm -f "$LOGS"/*.log

# ---- npm ---------------------------------------------------------------------
STAMP="$DIR/node_modules/.inspector-lock.sha256"
want="$(sha256sum "$DIR/package-lock.json" | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" && -x "$DIR/node_modules/.bin/mcp-inspector" ]]; then
    log "reusing $DIR/node_modules"
else
    log "npm ci (node $(node --version), npm $(npm --version))"
    (cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error)
    printf '%s\n' "$want" >"$STAMP"
fi
INSPECTOR="$DIR/node_modules/.bin/mcp-inspector"
log "inspector $("$INSPECTOR" --version 2>/dev/null || echo '(version unknown)')"
# The CLI keeps a catalog of servers (by default in ~/.mcp-inspector); keep it in target/.
export MCP_CATALOG_PATH="$WORK/catalog.json"

# ---- checks --------------------------------------------------------------------
# name | expected substring | Inspector arguments after the target
CHECKS=(
    "tools/list|\"name\": \"test_simple_text\"|--method tools/list"
    "tools/call|hello_from_the_inspector|--method tools/call --tool-name echo --tool-arg text=hello_from_the_inspector"
    "resources/read|This is the content of the static text resource.|--method resources/read --uri test://static-text"
    "prompts/get|arg1='one', arg2='two'|--method prompts/get --prompt-name test_prompt_with_arguments --prompt-args arg1=one arg2=two"
)

FAILED=0
PASSED=0
SERVER_PID=""
stop_server() {
    if [[ -n "$SERVER_PID" ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}
trap stop_server EXIT

# run_check LABEL EXPECTED TARGET... -- ARGS...: one Inspector command, judged by exit code and output.
run_check() {
    local label="$1" want="$2"
    shift 2
    local logf="$LOGS/${label//\//_}.log" rc=0 start=$SECONDS
    timeout "$TIMEOUT" "$INSPECTOR" --cli "$@" >"$logf" 2>&1 </dev/null || rc=$?
    if [[ $rc -eq 0 ]] && grep -qF -- "$want" "$logf"; then
        PASSED=$((PASSED + 1))
        printf '  ok    %-36s (%ds)\n' "$label" "$((SECONDS - start))"
    else
        FAILED=$((FAILED + 1))
        printf '  FAIL  %-36s exit %d; expected the output to contain: %s\n' "$label" "$rc" "$want"
        printf '  ---- %s\n' "${logf#"$ROOT"/}"
        sed 's/^/  | /' "$logf"
    fi
}

for i in "${!BIN_NAMES[@]}"; do
    name="${BIN_NAMES[$i]}"
    bin="${BIN_PATHS[$i]}"

    log "$name over stdio: $bin"
    for check in "${CHECKS[@]}"; do
        IFS='|' read -r method want args <<<"$check"
        # shellcheck disable=SC2086 # the arguments are words, split on purpose
        run_check "$name-stdio-$method" "$want" "$bin" $args
    done

    log "$name over Streamable HTTP: $bin --http 127.0.0.1:0"
    server_log="$LOGS/$name-http-server.log"
    "$bin" --http 127.0.0.1:0 </dev/null >/dev/null 2>"$server_log" &
    SERVER_PID=$!
    url=""
    for ((t = 0; t < 100; t++)); do # up to 10 s
        url="$(sed -n 's|^listening on \(http://[^ ]*\)$|\1|p' "$server_log" | head -n1)"
        [[ -n "$url" ]] && break
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z "$url" ]]; then
        FAILED=$((FAILED + 4))
        echo "  FAIL  $name announced no URL; its stderr:"
        sed 's/^/  | /' "$server_log"
        stop_server
        continue
    fi
    for check in "${CHECKS[@]}"; do
        IFS='|' read -r method want args <<<"$check"
        # shellcheck disable=SC2086
        run_check "$name-http-$method" "$want" "$url" --transport http $args
    done
    stop_server
done

echo "inspector: $PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]

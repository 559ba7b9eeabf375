#!/usr/bin/env bash
# Interop check of our OAuth 2.1 resource server (the everything example's `--auth-issuer`)
# against a real authorization server: panva's `oidc-provider` (pinned in package.json), and the
# official TypeScript SDK client (`@modelcontextprotocol/sdk`, the version tests/interop/ts pins)
# getting its own token from it.
#
# Usage: bash tests/oidc/run.sh [TOKIO_BINARY [SMOL_BINARY]]
#   defaults (relative to the repo root):
#     target/debug/examples/everything        (mcp-tokio)
#     target/debug/examples/everything-smol   (mcp-smol)
#
# Builds nothing; build the binaries first:
#   cargo build -p mcp-tokio --example everything -p mcp-smol --example everything-smol
#
# Starts two provider.mjs instances (oidc-provider on 127.0.0.1, free ports, issuers
# http://127.0.0.1:PORT; client `mcp-check`, client_credentials, resource indicators -> JWT
# access tokens): `rfc8414` serves /.well-known/oauth-authorization-server (the document our
# server reads first) and /.well-known/openid-configuration, `openid-only` only the latter (our
# server must fall back to it). For each binary and each of them: picks a free port, starts
#   BINARY --http 127.0.0.1:PORT --auth-issuer ISSUER --auth-resource http://127.0.0.1:PORT/mcp
# waits for its `listening on http://HOST:PORT/mcp` stderr line and runs check.mjs against it,
# then stops the server. check.mjs's 17 checks (see there): the 401 challenge and the protected
# resource metadata, the AS discovery and a client_credentials token for the resource,
# initialize / tools/call echo with it, an RS256 token, the refusals of a token for another
# resource, a forged signature, a query-string token and the other provider's token, then the
# TypeScript SDK client from the URL alone. One summary line per binary at the end.
#
# Environment:
#   OIDC_TIMEOUT  seconds one HTTP exchange inside check.mjs may take (default 15)
#   OIDC_SDK=0    skip the TypeScript SDK client checks
#   OIDC_DEBUG=1  the providers also log each grant's outcome (target/oidc/provider-PASS.log)
#
# Side effects: npm packages in tests/oidc/node_modules (reused while package-lock.json is
# unchanged), logs in target/oidc/ (provider-PASS.log: the providers' request logs;
# NAME-PASS-server.log, NAME-PASS-check.log). Exits non-zero if any check fails on either
# binary, or a server panicked, or a server or provider died.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$(pwd)"

TOKIO_BIN="${1:-target/debug/examples/everything}"
SMOL_BIN="${2:-target/debug/examples/everything-smol}"
DIR="$ROOT/tests/oidc"
LOGS="$ROOT/target/oidc"
TIMEOUT="${OIDC_TIMEOUT:-30}"
RUN_TIMEOUT=120 # hard cap on one check.mjs run, seconds

log() { printf '==> %s\n' "$*"; }
die() { printf 'oidc: error: %s\n' "$*" >&2; exit 1; }

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
command -v node >/dev/null || die "node not found"
command -v python3 >/dev/null || die "python3 not found (used to pick free ports)"

mkdir -p "$LOGS"
rm -f "$LOGS"/*.log

# ---- npm ---------------------------------------------------------------------
STAMP="$DIR/node_modules/.oidc-lock.sha256"
want="$(sha256sum "$DIR/package-lock.json" | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" \
    && -f "$DIR/node_modules/oidc-provider/package.json" \
    && -f "$DIR/node_modules/@modelcontextprotocol/sdk/package.json" ]]; then
    log "reusing $DIR/node_modules"
else
    log "npm ci (node $(node --version), npm $(npm --version))"
    (cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error)
    printf '%s\n' "$want" >"$STAMP"
fi
pkg_version() { node -p "require('$DIR/node_modules/$1/package.json').version"; }
log "oidc-provider $(pkg_version oidc-provider), @modelcontextprotocol/sdk $(pkg_version @modelcontextprotocol/sdk), node $(node --version)"

# ---- processes -----------------------------------------------------------------
declare -a PROVIDER_PIDS=()
SERVER_PID=""
stop_pid() { # pid
    [[ -n "$1" ]] || return 0
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
cleanup() {
    local pid
    stop_pid "$SERVER_PID"
    SERVER_PID=""
    for pid in "${PROVIDER_PIDS[@]}"; do stop_pid "$pid"; done
    PROVIDER_PIDS=()
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# ---- the authorization servers ----------------------------------------------------
# Two oidc-providers: one serving RFC 8414 metadata (/.well-known/oauth-authorization-server,
# which our server reads first) and one serving only /.well-known/openid-configuration (the
# fallback). Each binary is checked against both.
PASSES=(rfc8414 openid-only)
declare -A ISSUERS=() PROVIDER_PID_OF=()
start_provider() { # pass provider-args...
    local pass="$1" out="$LOGS/provider-$1.out.log" logf="$LOGS/provider-$1.log" pid issuer="" t
    shift
    : >"$out" # exists before the poll below reads it (the child opens it asynchronously)
    node "$DIR/provider.mjs" 0 "$@" </dev/null >"$out" 2>"$logf" &
    pid=$!
    PROVIDER_PIDS+=("$pid")
    for ((t = 0; t < 600; t++)); do # up to 60 s on a loaded machine
        issuer="$(sed -n 's|^oidc-provider ready at \(http://[^ ]*\).*$|\1|p' "$out" | head -n1)"
        [[ -n "$issuer" ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [[ -z "$issuer" ]]; then
        echo "oidc: the $pass provider announced no issuer; its output:" >&2
        sed 's/^/  | /' "$out" "$logf" >&2
        exit 1
    fi
    ISSUERS[$pass]="$issuer"
    PROVIDER_PID_OF[$pass]="$pid"
    log "authorization server ($pass): oidc-provider at $issuer${*:+ ($*)} (pid $pid)"
}
start_provider rfc8414
start_provider openid-only --openid-configuration-only

# ---- the resource servers ---------------------------------------------------------
declare -a RESULTS=()
FAILURES=0

start_server() { # name binary issuer logfile; sets SERVER_PID and URL (empty on failure)
    local name="$1" bin="$2" issuer="$3" logf="$4" attempt port t
    URL=""
    for attempt in 1 2 3; do # a picked port may be taken before the server binds it
        port="$(free_port)"
        : >"$logf"
        "$bin" --http "127.0.0.1:$port" --auth-issuer "$issuer" --auth-resource "http://127.0.0.1:$port/mcp" \
            </dev/null >/dev/null 2>"$logf" &
        SERVER_PID=$!
        for ((t = 0; t < 600; t++)); do # up to 60 s: a loaded machine starts debug builds slowly
            URL="$(sed -n 's|^listening on \(http://[^ ]*\)$|\1|p' "$logf" | head -n1)"
            [[ -n "$URL" ]] && break
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        if [[ -n "$URL" ]]; then
            if [[ "$URL" != "http://127.0.0.1:$port/mcp" ]]; then
                echo "  $name announced $URL, expected http://127.0.0.1:$port/mcp"
                URL=""
            fi
            return 0
        fi
        stop_pid "$SERVER_PID"
        SERVER_PID=""
        grep -qi 'in use' "$logf" || return 0
        echo "  $name: port $port was taken; retrying"
    done
}

run_pass() { # name binary pass; appends to LINE, sets PASS_OK=0 on failure
    local name="$1" bin="$2" pass="$3" issuer="${ISSUERS[$3]}"
    local server_log="$LOGS/$name-$pass-server.log" check_log="$LOGS/$name-$pass-check.log"
    local rc=0 summary problem="" start=$SECONDS
    local -a check_args
    log "$name x $pass: $bin --http 127.0.0.1:PORT --auth-issuer $issuer"
    start_server "$name" "$bin" "$issuer" "$server_log"
    if [[ -z "$URL" ]]; then
        echo "  FAIL  $name announced no URL; its stderr:"
        sed 's/^/  | /' "$server_log"
        stop_pid "$SERVER_PID"
        SERVER_PID=""
        PASS_OK=0
        LINE+="${LINE:+; }$pass: the server announced no URL (log: ${server_log#"$ROOT"/})"
        return 0
    fi
    echo "  listening on $URL (pid $SERVER_PID)"
    local other
    for other in "${PASSES[@]}"; do [[ "$other" != "$pass" ]] && break; done
    check_args=(--issuer "$issuer" --other-issuer "${ISSUERS[$other]}" --url "$URL" --timeout "$TIMEOUT")
    [[ "${OIDC_SDK:-1}" == "0" ]] && check_args+=(--no-sdk)
    (cd "$DIR" && timeout --kill-after=5 "$RUN_TIMEOUT" node check.mjs "${check_args[@]}") 2>&1 | tee "$check_log" || rc=$?
    summary="$(sed -n 's/^oidc-check: \([0-9]* passed, [0-9]* failed\)$/\1/p' "$check_log" | tail -n1)"
    [[ $rc -eq 0 && -z "$summary" ]] && rc=1 # the checker must end with its summary line
    [[ $rc -eq 124 || $rc -eq 137 ]] && summary="timed out after ${RUN_TIMEOUT}s"
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        problem="the server exited during the checks"
    elif grep -q 'panicked' "$server_log"; then
        problem="the server panicked"
    fi
    stop_pid "$SERVER_PID"
    SERVER_PID=""
    if [[ -n "$problem" ]]; then
        rc=1
        echo "  FAIL  $name: $problem; its stderr:"
        sed 's/^/  | /' "$server_log"
    fi
    LINE+="${LINE:+; }$pass: ${summary:-no summary line}"
    if [[ $rc -ne 0 ]]; then
        PASS_OK=0
        LINE+="${problem:+, $problem}, exit $rc, logs ${check_log#"$ROOT"/} ${server_log#"$ROOT"/}"
    fi
    LINE+=" ($((SECONDS - start))s)"
}

for i in "${!BIN_NAMES[@]}"; do
    name="${BIN_NAMES[$i]}"
    LINE=""
    PASS_OK=1
    for pass in "${PASSES[@]}"; do
        run_pass "$name" "${BIN_PATHS[$i]}" "$pass"
    done
    if [[ $PASS_OK -eq 1 ]]; then
        RESULTS+=("PASS  $name  ($LINE)")
    else
        FAILURES=$((FAILURES + 1))
        RESULTS+=("FAIL  $name  ($LINE)")
    fi
done

for pass in "${PASSES[@]}"; do
    if ! kill -0 "${PROVIDER_PID_OF[$pass]}" 2>/dev/null; then
        FAILURES=$((FAILURES + 1))
        RESULTS+=("FAIL  the $pass provider exited during the run (log: target/oidc/provider-$pass.log)")
    fi
    if grep -q 'server_error' "$LOGS/provider-$pass.log"; then
        echo "oidc: the $pass provider logged server errors (target/oidc/provider-$pass.log):"
        grep -A5 'server_error' "$LOGS/provider-$pass.log" | sed 's/^/  | /'
    fi
done

echo
log "oidc summary (authorization servers: oidc-provider $(pkg_version oidc-provider) at ${ISSUERS[rfc8414]} and, openid-configuration only, ${ISSUERS[openid-only]})"
printf '    %s\n' "${RESULTS[@]}"
if [[ $FAILURES -ne 0 ]]; then
    echo "oidc: FAILED ($FAILURES of the lines above)"
    exit 1
fi
echo "oidc: all ${#BIN_NAMES[@]} binaries passed (${#PASSES[@]} passes each)"

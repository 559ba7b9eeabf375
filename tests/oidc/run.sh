#!/usr/bin/env bash
# Interop check of our OAuth 2.1 resource server (the everything example's `--auth-issuer`)
# against a real authorization server: panva's `oidc-provider` (pinned in package.json), the
# official TypeScript SDK client (`@modelcontextprotocol/sdk`, the version tests/interop/ts pins)
# and the official Python SDK client (`mcp`, pinned by tests/interop/python/requirements.txt)
# getting their own tokens from it, over http:// and over https:// (HTTP/2 and HTTP/1.1).
#
# Usage: bash tests/oidc/run.sh [TOKIO_BINARY [SMOL_BINARY]]
#   defaults (relative to the repo root):
#     target/debug/examples/everything        (mcp-tokio)
#     target/debug/examples/everything-smol   (mcp-smol)
#
# Builds nothing; build the binaries first (with TLS, for the https pass):
#   cargo build -p mcp-tokio --example everything -p mcp-smol --example everything-smol \
#       --features mcp-tokio/tls,mcp-smol/tls
#
# Starts two provider.mjs instances (oidc-provider on 127.0.0.1, plain http, free ports, issuers
# http://127.0.0.1:PORT; client `mcp-check`, client_credentials, resource indicators -> JWT
# access tokens with the asked-for scopes of `mcp:tools mcp:whoami`, `mcp:tools` if none is
# asked; a token request with a DPoP proof gets a DPoP-bound one; client `mcp-check-opaque`
# gets opaque tokens; client `mcp-rs` may introspect them; see provider.mjs): `rfc8414` serves
# /.well-known/oauth-authorization-server (the document our server reads first) and
# /.well-known/openid-configuration, `openid-only` only the latter (our server and the clients
# must fall back to it). Makes a throwaway CA and a server certificate for 127.0.0.1 (SAN
# IP:127.0.0.1, DNS:localhost; EC P-256) with the openssl CLI in target/oidc/pki/, fresh each
# run. Then, for each binary, five passes, each with a fresh server on a free port, stopped
# after it:
#   rfc8414      BINARY --http 127.0.0.1:PORT --auth-issuer RFC8414_ISSUER
#                       --auth-resource http://127.0.0.1:PORT/mcp
#   openid-only  the same with the openid-only provider's issuer
#   https        BINARY --http 127.0.0.1:PORT --auth-issuer RFC8414_ISSUER
#                       --auth-resource https://127.0.0.1:PORT/mcp
#                       --tls-cert target/oidc/pki/server.pem --tls-key target/oidc/pki/server.key
#                (the issuer stays on plain http: the server's own fetches of the issuer's
#                metadata and keys cannot be told to trust a private CA)
#   dpop         the rfc8414 pass's command with --auth-dpop (DPoP-bound tokens too, RFC 9449)
#   introspect   the rfc8414 pass's command with --auth-introspect RFC8414_INTROSPECTION_ENDPOINT
#                --auth-client mcp-rs:mcp-rs-secret (tokens checked at the provider's RFC 7662
#                endpoint, so opaque ones work); and a second server alike but with
#                --auth-client mcp-rs:not-the-secret, which the endpoint refuses (401)
# Each pass waits for the server's `listening on http(s)://127.0.0.1:PORT/mcp` stderr line, then
# runs, against that URL:
#   node     rfc8414, openid-only, https: check.mjs (20 checks, see there): the 401 challenge and
#            the protected resource metadata, the AS discovery and a client_credentials token
#            for the resource, initialize / initialized / tools/list / tools/call echo with it,
#            step-up (whoami without mcp:whoami: 403 insufficient_scope naming it; a token with
#            the challenge's scopes; whoami: 200 with that role), a session id without the
#            token, an RS256 token, the refusals of a token for another resource, a forged
#            signature, a query-string token and the other provider's token, then the
#            TypeScript SDK's ClientCredentialsProvider from the URL alone (connect, listTools,
#            callTool echo; and an `info` line, not counted, on whether the SDK steps up to
#            mcp:whoami by itself: 1.32.2 does not, see check.mjs)
#            dpop: dpop.mjs (27 checks, see there): the two-scheme challenge and the PRM's
#            DPoP algs; an ES256 key (node:crypto) and a token bound to it (the provider's
#            use_dpop_nonce retry; token_type DPoP, cnf.jkt its thumbprint); initialize /
#            initialized / echo each with a fresh proof; 401 invalid_dpop_proof for a replayed
#            proof, none, one for GET, for another URL, 5 minutes old, for another token, and one
#            carrying the key but signed by another; 401 for a proof by another key; 401
#            invalid_token for the bound token as Bearer and for a bearer token with the DPoP
#            scheme; a bearer token still works; step-up with bound tokens; EdDSA, RS256 and
#            PS256 keys; the TypeScript SDK (bearer) connect, listTools, callTool echo
#            introspect: introspect.mjs (20 checks, see there): an opaque token (mcp-check-opaque)
#            and the endpoint's answer for it (active, aud, scope, exp); initialize / initialized
#            / echo; answers cached (counted in the provider's request log); step-up with the
#            scopes introspected; 401 invalid_token for a made-up token (its refusal cached),
#            one for another resource and a DPoP-bound one as Bearer; the DPoP scheme gets the
#            Bearer challenge; an `info` line on a JWT (which oidc-provider will not
#            introspect); the wrong-secret server: 503 + Retry-After for every token, 401
#            without one; the TypeScript SDK as mcp-check-opaque: connect, listTools, echo
#   python   python/check.py (4 checks, see there): the Python SDK's ClientCredentialsOAuthProvider
#            with streamable_http_client + ClientSession from the URL alone: connect, list_tools,
#            call_tool echo, and whoami, which the SDK must step up for by itself (dpop: bearer
#            tokens, the two-scheme challenges; introspect: as mcp-check-opaque, --opaque, and
#            whoami's identity `client:mcp-check-opaque`, as the server names a subject-less
#            introspected token)
#   curl     (https pass only; 6 checks, curl_checks below) HTTP/2 is really negotiated (ALPN h2):
#            no token -> 401 + challenge, initialize with a token -> 200 + session, tools/call
#            echo -> 200, whoami with too little scope -> 403 insufficient_scope, all over h2;
#            and initialize over HTTP/1.1 (--http1.1) on the same TLS port -> 200
# Over https, Node trusts the throwaway CA by NODE_EXTRA_CA_CERTS (Node's fetch speaks HTTP/1.1
# there), Python's httpx2 by SSL_CERT_FILE, curl by --cacert. One summary line per binary at the
# end. About 35 s on two cores once the installs are done (22 s with OIDC_DPOP=0 OIDC_INTROSPECT=0;
# a new Python venv: about 25 s more).
#
# Environment:
#   OIDC_TIMEOUT  seconds one HTTP exchange inside the checkers may take (default 30)
#   OIDC_SDK=0    skip the TypeScript SDK client checks
#   OIDC_PYTHON=0 skip the Python SDK client (and making its venv)
#   OIDC_HTTPS=0  skip the https pass (and the certificates)
#   OIDC_DPOP=0   skip the dpop pass
#   OIDC_INTROSPECT=0  skip the introspect pass
#   OIDC_VENV     the Python venv to make or reuse (default target/oidc/venv; tests/interop's
#                 target/interop/venv holds the same pins and would do)
#   PYTHON        interpreter for a new venv (default: python3.11 if found, else python3)
#   OIDC_DEBUG=1  the providers also log each grant's outcome (target/oidc/provider-PASS.log)
#
# Side effects: npm packages in tests/oidc/node_modules (reused while package-lock.json is
# unchanged), the Python venv (reused while tests/interop/python/requirements.txt is unchanged;
# see tests/interop/venv.sh), target/oidc/pki/ (CA and server key and certificate), logs in
# target/oidc/ (provider-PROVIDER.log: the providers' request logs; NAME-PASS-server.log,
# NAME-introspect-wrong-secret-server.log, NAME-PASS-node.log, NAME-PASS-python.log,
# NAME-PASS-curl.log). Exits non-zero if any check fails on either binary, or a server panicked,
# or a server or provider died.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$(pwd)"

TOKIO_BIN="${1:-target/debug/examples/everything}"
SMOL_BIN="${2:-target/debug/examples/everything-smol}"
DIR="$ROOT/tests/oidc"
LOGS="$ROOT/target/oidc"
PKI="$LOGS/pki"
CURL_TMP="$LOGS/curl" # curl_checks' scratch files
TIMEOUT="${OIDC_TIMEOUT:-30}"
RUN_TIMEOUT=120 # hard cap on one checker run, seconds
WITH_PYTHON="${OIDC_PYTHON:-1}"
WITH_HTTPS="${OIDC_HTTPS:-1}"
WITH_DPOP="${OIDC_DPOP:-1}"
WITH_INTROSPECT="${OIDC_INTROSPECT:-1}"
CLIENT_ID=mcp-check # provider.mjs's client
CLIENT_SECRET=mcp-check-secret
OPAQUE_CLIENT_ID=mcp-check-opaque # provider.mjs's client whose access tokens are opaque (same secret)
RS_CLIENT=mcp-rs:mcp-rs-secret     # provider.mjs's client for the resource server at the introspection endpoint

log() { printf '==> %s\n' "$*"; }
die() { printf 'oidc: error: %s\n' "$*" >&2; exit 1; }

abspath() {
    case "$1" in
        /*) printf '%s\n' "$1" ;;
        *) printf '%s\n' "$ROOT/$1" ;;
    esac
}
VENV="$(abspath "${OIDC_VENV:-target/oidc/venv}")"

declare -a BIN_NAMES=() BIN_PATHS=()
for spec in "tokio=$TOKIO_BIN" "smol=$SMOL_BIN"; do
    path="$(abspath "${spec#*=}")"
    [[ -x "$path" ]] || die "server binary for ${spec%%=*} not found or not executable: $path
  (build it first: cargo build -p mcp-tokio --example everything -p mcp-smol --example everything-smol --features mcp-tokio/tls,mcp-smol/tls)"
    BIN_NAMES+=("${spec%%=*}")
    BIN_PATHS+=("$path")
done
command -v node >/dev/null || die "node not found"
command -v python3 >/dev/null || die "python3 not found (used to pick free ports and read JSON)"
if [[ "$WITH_HTTPS" == "1" ]]; then
    command -v openssl >/dev/null || die "openssl not found (makes the https pass's certificates; OIDC_HTTPS=0 skips that pass)"
    command -v curl >/dev/null || die "curl not found (checks HTTP/2 in the https pass; OIDC_HTTPS=0 skips that pass)"
    curl --version | grep -qw HTTP2 || die "this curl has no HTTP/2 support ($(curl --version | head -n1)); OIDC_HTTPS=0 skips the https pass"
fi

mkdir -p "$LOGS"
rm -rf "$LOGS"/*.log "$PKI" "$CURL_TMP"

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

# ---- the Python SDK (tests/interop's pins, its venv recipe) ------------------------
if [[ "$WITH_PYTHON" == "1" ]]; then
    # shellcheck source=tests/interop/venv.sh
    source "$ROOT/tests/interop/venv.sh"
    interop_venv "$VENV"
    "$VENV/bin/python" -c 'from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider' 2>/dev/null \
        || die "the mcp package in $VENV has no mcp.client.auth.extensions.client_credentials.ClientCredentialsOAuthProvider (OIDC_PYTHON=0 skips the Python client)"
fi

# ---- a throwaway CA and the server's certificate ------------------------------------
if [[ "$WITH_HTTPS" == "1" ]]; then
    mkdir -p "$PKI"
    pki() { # openssl args...: runs openssl in $PKI, its output to $PKI/openssl.out
        (cd "$PKI" && umask 077 && openssl "$@") >>"$PKI/openssl.out" 2>&1 \
            || { sed 's/^/  | /' "$PKI/openssl.out" >&2; die "openssl $1 failed (output above, in ${PKI#"$ROOT"/}/openssl.out)"; }
    }
    pki req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 \
        -subj "/CN=mcp oidc-check throwaway CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    pki req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr -subj "/CN=127.0.0.1"
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=critical,CA:FALSE" \
        "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >"$PKI/server.ext"
    pki x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" -days 2 \
        -extfile server.ext -out server.pem
    pki verify -CAfile ca.pem server.pem
    log "throwaway CA and a certificate for 127.0.0.1 in ${PKI#"$ROOT"/}/ ($(openssl version))"
fi

# ---- processes -----------------------------------------------------------------
declare -a PROVIDER_PIDS=() SERVER_PIDS=() # SERVER_PIDS: the servers of the pass running
stop_pid() { # pid
    [[ -n "$1" ]] || return 0
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
stop_servers() {
    local pid
    for pid in "${SERVER_PIDS[@]}"; do stop_pid "$pid"; done
    SERVER_PIDS=()
}
cleanup() {
    local pid
    stop_servers
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
# fallback). Each binary is checked against both over http, and against the first over https.
PROVIDERS=(rfc8414 openid-only)
PASSES=(rfc8414 openid-only)
[[ "$WITH_HTTPS" == "1" ]] && PASSES+=(https)
[[ "$WITH_DPOP" == "1" ]] && PASSES+=(dpop)
[[ "$WITH_INTROSPECT" == "1" ]] && PASSES+=(introspect)
declare -A PASS_PROVIDER=([rfc8414]=rfc8414 [openid-only]=openid-only [https]=rfc8414 [dpop]=rfc8414 [introspect]=rfc8414)
declare -A ISSUERS=() PROVIDER_PID_OF=()
start_provider() { # provider provider-args...
    local prov="$1" out="$LOGS/provider-$1.out.log" logf="$LOGS/provider-$1.log" pid issuer="" t
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
        echo "oidc: the $prov provider announced no issuer; its output:" >&2
        sed 's/^/  | /' "$out" "$logf" >&2
        exit 1
    fi
    ISSUERS[$prov]="$issuer"
    PROVIDER_PID_OF[$prov]="$pid"
    log "authorization server ($prov): oidc-provider at $issuer${*:+ ($*)} (pid $pid)"
}
start_provider rfc8414
start_provider openid-only --openid-configuration-only
INTROSPECTION_ENDPOINT=""
if [[ "$WITH_INTROSPECT" == "1" ]]; then
    INTROSPECTION_ENDPOINT="$(python3 -c 'import json, sys, urllib.request
doc = json.load(urllib.request.urlopen(sys.argv[1] + "/.well-known/openid-configuration", timeout=30))
print(doc.get("introspection_endpoint", ""))' "${ISSUERS[rfc8414]}")" || true
    [[ -n "$INTROSPECTION_ENDPOINT" ]] || die "the rfc8414 provider names no introspection_endpoint (see target/oidc/provider-rfc8414.log)"
    log "introspection endpoint (rfc8414): $INTROSPECTION_ENDPOINT"
fi

# ---- HTTP/2 (and HTTP/1.1) over TLS, with curl --------------------------------------
# curl_checks URL ISSUER: 6 checks against the https server at URL, printed like check.mjs's,
# ending with `oidc-curl: N passed, M failed`; exit 0 only if all passed. Scratch files in
# target/oidc/curl/.
mcp_curl() { # --http2|--http1.1 BODY [HEADER...]: POST to $CURL_URL; prints "HTTP-VERSION STATUS"
    local flag="$1" body="$2" h
    shift 2
    local -a hs=()
    for h in "$@"; do hs+=(-H "$h"); done
    curl "$flag" --cacert "$PKI/ca.pem" -sS --max-time "$TIMEOUT" -D "$CURL_TMP/headers" -o "$CURL_TMP/body" \
        -w '%{http_version} %{response_code}' -X POST -H 'content-type: application/json' \
        -H 'accept: application/json, text/event-stream' "${hs[@]}" --data-binary "$body" "$CURL_URL" \
        2>"$CURL_TMP/stderr" || printf 'curl failed: %s' "$(tr '\n' ' ' <"$CURL_TMP/stderr")"
}
header_of() { # NAME: that response header's value from the last mcp_curl (case-insensitive)
    { sed -n "s/^$1:[[:space:]]*//Ip" "$CURL_TMP/headers" | tr -d '\r' | head -n1; } 2>/dev/null || true
}
body_head() { # the start of the last mcp_curl's response body
    head -c 300 "$CURL_TMP/body" 2>/dev/null || true
}
curl_checks() {
    local issuer="$2" passed=0 failed=0 got tok="" wide="" session="" why prm
    CURL_URL="$1"
    prm="${CURL_URL%%/mcp}/.well-known/oauth-protected-resource/mcp"
    rm -rf "$CURL_TMP"
    mkdir -p "$CURL_TMP"
    outcome() { # name why (empty: ok)
        if [[ -z "$2" ]]; then
            passed=$((passed + 1))
            echo "  ok    $1"
        else
            failed=$((failed + 1))
            echo "  FAIL  $1: $2"
        fi
    }
    token() { # scope: a client_credentials token for the resource (empty on failure, why on stderr)
        local endpoint
        endpoint="$(curl -sS --max-time "$TIMEOUT" "$issuer/.well-known/openid-configuration" \
            | python3 -c 'import json, sys; print(json.load(sys.stdin)["token_endpoint"])')" || return 0
        curl -sS --max-time "$TIMEOUT" -u "$CLIENT_ID:$CLIENT_SECRET" -d grant_type=client_credentials \
            --data-urlencode "resource=$CURL_URL" --data-urlencode "scope=$1" "$endpoint" \
            | python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])' || true
    }
    local init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"oidc-curl","version":"1"}}}'
    local echo_call='{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi over h2"}}}'
    local whoami_call='{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{}}}'
    local session_headers

    got="$(mcp_curl --http2 "$init")"
    why=""
    if [[ "$got" != "2 401" ]]; then
        why="expected HTTP/2 401, got '$got'"
    elif [[ "$(header_of www-authenticate)" != *"resource_metadata=\"$prm\""* ]]; then
        why="no resource_metadata=\"$prm\" in WWW-Authenticate: $(header_of www-authenticate)"
    fi
    outcome "h2: no token -> HTTP/2 401 + Bearer resource_metadata challenge" "$why"

    tok="$(token mcp:tools)"
    why=""
    if [[ -z "$tok" ]]; then
        why="no token from $issuer"
    else
        got="$(mcp_curl --http2 "$init" "authorization: Bearer $tok")"
        session="$(header_of mcp-session-id)"
        if [[ "$got" != "2 200" ]]; then
            why="expected HTTP/2 200, got '$got': $(body_head)"
        elif [[ -z "$session" ]]; then
            why="no mcp-session-id header"
        elif ! grep -q '"protocolVersion"' "$CURL_TMP/body"; then
            why="no initialize result: $(body_head)"
        fi
    fi
    outcome "h2: initialize with a token -> HTTP/2 200 + session id" "$why"

    session_headers=("authorization: Bearer $tok" "mcp-session-id: $session" "mcp-protocol-version: 2025-06-18")
    why="needs the session (the check above failed)"
    if [[ -n "$session" ]]; then
        got="$(mcp_curl --http2 "$echo_call" "${session_headers[@]}")"
        why=""
        if [[ "$got" != "2 200" ]]; then
            why="expected HTTP/2 200, got '$got': $(body_head)"
        elif ! grep -q 'hi over h2' "$CURL_TMP/body"; then
            why="the echo does not come back: $(body_head)"
        fi
    fi
    outcome "h2: tools/call echo -> HTTP/2 200 with the text" "$why"

    why="needs the session (a check above failed)"
    if [[ -n "$session" ]]; then
        got="$(mcp_curl --http2 "$whoami_call" "${session_headers[@]}")"
        why=""
        if [[ "$got" != "2 403" ]]; then
            why="expected HTTP/2 403, got '$got': $(body_head)"
        elif [[ "$(header_of www-authenticate)" != *'error="insufficient_scope"'* || "$(header_of www-authenticate)" != *mcp:whoami* ]]; then
            why="WWW-Authenticate is no insufficient_scope challenge naming mcp:whoami: $(header_of www-authenticate)"
        elif ! grep -q -- '-32023' "$CURL_TMP/body"; then
            why="the body is no JSON-RPC error -32023: $(body_head)"
        fi
    fi
    outcome "h2: whoami with only mcp:tools -> HTTP/2 403 insufficient_scope" "$why"

    wide="$(token "mcp:tools mcp:whoami")"
    why="no token with mcp:whoami from $issuer"
    if [[ -n "$wide" && -n "$session" ]]; then
        session_headers[0]="authorization: Bearer $wide"
        got="$(mcp_curl --http2 "$whoami_call" "${session_headers[@]}")"
        why=""
        if [[ "$got" != "2 200" ]]; then
            why="expected HTTP/2 200, got '$got': $(body_head)"
        elif ! grep -q 'mcp:whoami' "$CURL_TMP/body"; then
            why="whoami's roles lack mcp:whoami: $(body_head)"
        fi
    elif [[ -z "$session" ]]; then
        why="needs the session (a check above failed)"
    fi
    outcome "h2: whoami with mcp:whoami -> HTTP/2 200, the role listed" "$why"

    why="needs a token (a check above failed)"
    if [[ -n "$tok" ]]; then
        got="$(mcp_curl --http1.1 "$init" "authorization: Bearer $tok")"
        why=""
        [[ "$got" == "1.1 200" ]] || why="expected HTTP/1.1 200, got '$got': $(body_head)"
    fi
    outcome "http/1.1 over the same TLS port (ALPN http/1.1): initialize -> 200" "$why"

    echo "oidc-curl: $passed passed, $failed failed"
    [[ $failed -eq 0 ]]
}

# ---- the resource servers ---------------------------------------------------------
declare -a RESULTS=()
FAILURES=0

start_server() { # name binary issuer logfile scheme [ARG...]: the server with the --auth-* ARGs
    # too; adds its pid to SERVER_PIDS, sets STARTED_PID and URL (URL empty on failure)
    local name="$1" bin="$2" issuer="$3" logf="$4" scheme="$5" attempt port t
    shift 5
    local -a tls=()
    [[ "$scheme" == "https" ]] && tls=(--tls-cert "$PKI/server.pem" --tls-key "$PKI/server.key")
    URL=""
    for attempt in 1 2 3; do # a picked port may be taken before the server binds it
        port="$(free_port)"
        : >"$logf"
        "$bin" --http "127.0.0.1:$port" --auth-issuer "$issuer" --auth-resource "$scheme://127.0.0.1:$port/mcp" "$@" "${tls[@]}" \
            </dev/null >/dev/null 2>"$logf" &
        STARTED_PID=$!
        SERVER_PIDS+=("$STARTED_PID")
        for ((t = 0; t < 600; t++)); do # up to 60 s: a loaded machine starts debug builds slowly
            URL="$(sed -n 's|^listening on \(https\{0,1\}://[^ ]*\)$|\1|p' "$logf" | head -n1)"
            [[ -n "$URL" ]] && break
            kill -0 "$STARTED_PID" 2>/dev/null || break
            sleep 0.1
        done
        if [[ -n "$URL" ]]; then
            if [[ "$URL" != "$scheme://127.0.0.1:$port/mcp" ]]; then
                echo "  $name announced $URL, expected $scheme://127.0.0.1:$port/mcp"
                URL=""
            fi
            return 0
        fi
        grep -qi 'in use' "$logf" || return 0
        stop_pid "$STARTED_PID"
        unset 'SERVER_PIDS[-1]'
        echo "  $name: port $port was taken; retrying"
    done
}

# run_part LABEL PREFIX LOGFILE COMMAND...: runs one checker, its output shown and kept in
# LOGFILE; appends "LABEL N ok[ M FAILED]" to PARTS; fails unless the checker exited 0 after its
# `PREFIX: N passed, M failed` line.
run_part() {
    local label="$1" prefix="$2" logf="$3" rc=0 summary n m
    shift 3
    echo "  -- $label"
    "$@" 2>&1 | tee "$logf" || rc=$?
    summary="$(sed -n "s/^$prefix: \([0-9]* passed, [0-9]* failed\)\$/\1/p" "$logf" | tail -n1)"
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        PARTS+="${PARTS:+, }$label timed out after ${RUN_TIMEOUT}s"
        return 1
    elif [[ -z "$summary" ]]; then
        PARTS+="${PARTS:+, }$label no summary line (exit $rc)"
        return 1
    fi
    read -r n _ m _ <<<"$summary"
    if [[ $rc -eq 0 && $m -eq 0 ]]; then
        PARTS+="${PARTS:+, }$label $n ok"
        return 0
    fi
    PARTS+="${PARTS:+, }$label $n ok $m FAILED"
    return 1
}

# The server's problems after a pass: exited, or panicked (empty: none).
server_problem() { # pid logfile what
    if ! kill -0 "$1" 2>/dev/null; then
        echo "$3 exited during the checks"
    elif grep -q 'panicked' "$2"; then
        echo "$3 panicked"
    fi
}

run_pass() { # name binary pass; appends to LINE, sets PASS_OK=0 on failure
    local name="$1" bin="$2" pass="$3" prov="${PASS_PROVIDER[$3]}" scheme=http
    [[ "$pass" == "https" ]] && scheme=https
    local issuer="${ISSUERS[$prov]}" prefix="$LOGS/$name-$pass"
    local server_log="$prefix-server.log" wrong_log="$prefix-wrong-secret-server.log"
    local ok=1 problem="" start=$SECONDS other url pid wrong_pid="" wrong_url="" script=check.mjs summary=oidc-check
    local -a check_args env_tls=() auth=() python_args=(--client-id "$CLIENT_ID")
    [[ "$scheme" == "https" ]] && env_tls=("NODE_EXTRA_CA_CERTS=$PKI/ca.pem" "SSL_CERT_FILE=$PKI/ca.pem")
    case "$pass" in
        dpop) auth=(--auth-dpop) script=dpop.mjs summary=oidc-dpop ;;
        introspect)
            auth=(--auth-introspect "$INTROSPECTION_ENDPOINT" --auth-client "$RS_CLIENT")
            script=introspect.mjs summary=oidc-introspect
            # No sub in an introspection answer for a client_credentials token: the server names
            # the client (client:ID), where the JWTs' sub is the client id itself.
            python_args=(--client-id "$OPAQUE_CLIENT_ID" --opaque --identity "client:$OPAQUE_CLIENT_ID")
            ;;
    esac
    log "$name x $pass: $bin --http 127.0.0.1:PORT --auth-issuer $issuer --auth-resource $scheme://127.0.0.1:PORT/mcp${auth:+ ${auth[*]}}${env_tls:+ --tls-cert ${PKI#"$ROOT"/}/server.pem --tls-key ${PKI#"$ROOT"/}/server.key}"
    no_url() { # what logfile: the pass fails, that server having announced no URL
        echo "  FAIL  $name: $1 printed no \`listening on $scheme://127.0.0.1:PORT/mcp\` line; its stderr:"
        sed 's/^/  | /' "$2"
        stop_servers
        PASS_OK=0
        LINE+="${LINE:+; }$pass: $1 announced no $scheme URL (log: ${2#"$ROOT"/})"
    }
    start_server "$name" "$bin" "$issuer" "$server_log" "$scheme" "${auth[@]}"
    pid="$STARTED_PID"
    url="$URL"
    [[ -n "$url" ]] || { no_url "the server" "$server_log"; return 0; }
    if [[ "$pass" == "introspect" ]]; then
        # A second server, whose client secret the introspection endpoint refuses.
        start_server "$name" "$bin" "$issuer" "$wrong_log" "$scheme" \
            --auth-introspect "$INTROSPECTION_ENDPOINT" --auth-client "${RS_CLIENT%%:*}:not-the-secret"
        wrong_pid="$STARTED_PID"
        wrong_url="$URL"
        [[ -n "$wrong_url" ]] || { no_url "the wrong-secret server" "$wrong_log"; return 0; }
    fi
    echo "  listening on $url (pid $pid)${wrong_url:+; with a wrong --auth-client secret: $wrong_url (pid $wrong_pid)}"
    PARTS=""
    for other in "${PROVIDERS[@]}"; do [[ "$other" != "$prov" ]] && break; done
    check_args=(--issuer "$issuer" --url "$url" --timeout "$TIMEOUT")
    case "$pass" in
        dpop) ;;
        introspect)
            check_args+=(--introspection-endpoint "$INTROSPECTION_ENDPOINT" --rs-client "$RS_CLIENT"
                --provider-log "$LOGS/provider-$prov.log" --wrong-secret-url "$wrong_url") ;;
        *) check_args+=(--other-issuer "${ISSUERS[$other]}") ;;
    esac
    [[ "${OIDC_SDK:-1}" == "0" ]] && check_args+=(--no-sdk)
    run_part node "$summary" "$prefix-node.log" \
        env -C "$DIR" "${env_tls[@]}" timeout --kill-after=5 "$RUN_TIMEOUT" node "$script" "${check_args[@]}" || ok=0
    if [[ "$WITH_PYTHON" == "1" ]]; then
        run_part python oidc-python "$prefix-python.log" \
            env "${env_tls[@]}" timeout --kill-after=5 "$RUN_TIMEOUT" "$VENV/bin/python" "$DIR/python/check.py" \
            --url "$url" "${python_args[@]}" --client-secret "$CLIENT_SECRET" --issuer "$issuer" --timeout "$TIMEOUT" || ok=0
    fi
    if [[ "$scheme" == "https" ]]; then
        run_part curl oidc-curl "$prefix-curl.log" curl_checks "$url" "$issuer" || ok=0
    fi
    if [[ -n "$wrong_pid" ]]; then
        # What the wrong-secret server says of the endpoint's refusal (one line).
        sed 's/\x1b\[[0-9;]*m//g' "$wrong_log" | grep -m1 'introspection endpoint' | sed 's/^/  the wrong-secret server logged: /' || true
    fi
    problem="$(server_problem "$pid" "$server_log" "the server")"
    if [[ -n "$wrong_pid" && -z "$problem" ]]; then
        problem="$(server_problem "$wrong_pid" "$wrong_log" "the wrong-secret server")"
        [[ -z "$problem" ]] || server_log="$wrong_log"
    fi
    stop_servers
    if [[ -n "$problem" ]]; then
        ok=0
        echo "  FAIL  $name: $problem; its stderr:"
        sed 's/^/  | /' "$server_log"
        PARTS+=", $problem"
    fi
    LINE+="${LINE:+; }$pass: $PARTS ($((SECONDS - start))s)"
    if [[ $ok -eq 0 ]]; then
        PASS_OK=0
        LINE+=" [logs: ${prefix#"$ROOT"/}-*.log]"
    fi
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

for prov in "${PROVIDERS[@]}"; do
    if ! kill -0 "${PROVIDER_PID_OF[$prov]}" 2>/dev/null; then
        FAILURES=$((FAILURES + 1))
        RESULTS+=("FAIL  the $prov provider exited during the run (log: target/oidc/provider-$prov.log)")
    fi
    if grep -q 'server_error' "$LOGS/provider-$prov.log"; then
        echo "oidc: the $prov provider logged server errors (target/oidc/provider-$prov.log):"
        grep -A5 'server_error' "$LOGS/provider-$prov.log" | sed 's/^/  | /'
    fi
done

echo
log "oidc summary (authorization servers: oidc-provider $(pkg_version oidc-provider) at ${ISSUERS[rfc8414]} and, openid-configuration only, ${ISSUERS[openid-only]}; passes: ${PASSES[*]})"
printf '    %s\n' "${RESULTS[@]}"
if [[ $FAILURES -ne 0 ]]; then
    echo "oidc: FAILED ($FAILURES of the lines above)"
    exit 1
fi
echo "oidc: all ${#BIN_NAMES[@]} binaries passed (${#PASSES[@]} passes each)"

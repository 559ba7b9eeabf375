#!/usr/bin/env bash
# Scale-out check with real parts: redis-server, three replicas of the everything example sharing
# it (`--cluster redis://...`), haproxy round-robin in front (tests/scale/haproxy.cfg.in), and
# the official Python MCP client (tests/scale/scenarios.py) driving six scenarios through it.
#
# Usage: bash tests/scale/run.sh [BIN]
#   BIN  the everything binary (default target/debug/examples/everything); builds nothing:
#        cargo build -p mcp-tokio --example everything
#
# Needs redis-server, redis-cli and haproxy on PATH (Debian: apt-get install redis-server
# haproxy; .ci/run installs them). Installs nothing else itself: the Python venv is the interop
# check's (target/interop/venv, tests/interop/python/requirements.txt), created or reused the
# same way.
#
# Environment:
#   PYTHON          interpreter for the venv (default: python3.11 if found, else python3)
#   SCALE_REPLICAS  how many replicas (default 3; the scenarios need at least 3)
#   SCALE_CLUSTER   1 (default): start the replicas with --cluster and --replica if BIN knows
#                   them; 0: start them unshared (the sharing scenarios then FAIL, which shows
#                   the harness can fail)
#   SCALE_STICKY    1 (default): haproxy sticks legacy sessions to their replica; 0: drops the
#                   stick rules (a legacy session's requests then reach every replica, and the
#                   others forward them to the one holding it: the legacy scenario still passes
#                   with the cluster on)
#   SCALE_ONLY      run just these scenarios (e.g. 1,5), for debugging
#   SCALE_TIMEOUT   hard cap for the scenario run, seconds (default 150)
#
# Logs and generated files in target/scale/: redis.log, rN.log (replica stderr),
# haproxy.cfg, haproxy.log, scenarios.log. Exits non-zero if anything fails.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$(pwd)"
BIN="${1:-target/debug/examples/everything}"
case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
WORK="$ROOT/target/scale"
VENV="$ROOT/target/interop/venv"
REPLICAS="${SCALE_REPLICAS:-3}"
# Three pages of tools/list at the default page size (100), so each page can come from a
# different replica.
EXTRA_TOOLS=250

log() { printf '==> %s\n' "$*"; }
die() { printf 'scale: error: %s\n' "$*" >&2; exit 1; }

[[ -x "$BIN" ]] || die "everything binary not found: $BIN (cargo build -p mcp-tokio --example everything)"
for tool in redis-server redis-cli haproxy; do
    command -v "$tool" >/dev/null || die "$tool not found (Debian: apt-get install redis-server haproxy)"
done
[[ "$REPLICAS" -ge 3 ]] || die "SCALE_REPLICAS must be at least 3"

# ---- Python venv (shared with tests/interop/run.sh) ------------------------------------------
# shellcheck source=tests/interop/venv.sh
source "$ROOT/tests/interop/venv.sh"
interop_venv "$VENV"

# ---- processes -------------------------------------------------------------------------------
rm -rf "$WORK"
mkdir -p "$WORK/redis"
declare -a PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

# shellcheck source=tests/scale/common.sh
source "$ROOT/tests/scale/common.sh"

start_redis "$WORK/redis" "$WORK/redis.log"
PIDS+=("$REDIS_PID")
log "redis-server on 127.0.0.1:$RPORT"

CLUSTER_ARGS=0
if [[ "${SCALE_CLUSTER:-1}" == "1" ]]; then
    # --help exits non-zero: read its text, not its status.
    help="$("$BIN" --help 2>&1 || true)"
    if [[ "$help" == *--cluster* ]]; then
        CLUSTER_ARGS=1
    else
        log "WARNING: $BIN has no --cluster flag: the replicas run unshared"
    fi
fi

# Replicas on ephemeral ports: each prints `listening on http://HOST:PORT/mcp` once bound.
declare -a NAMES=() URLS=() RPIDS=()
for i in $(seq 1 "$REPLICAS"); do
    name="r$i"
    # A port picked here rather than by the replica (port 0): the replica advertises its URL to
    # the others (--advertise) before it binds.
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    args=(--http "127.0.0.1:$port" --extra-tools "$EXTRA_TOOLS")
    [[ "$CLUSTER_ARGS" == "1" ]] && args+=(--cluster "redis://127.0.0.1:$RPORT" --replica "$name" --advertise "http://127.0.0.1:$port/mcp")
    RUST_LOG="${RUST_LOG:-info}" "$BIN" "${args[@]}" </dev/null >"$WORK/$name.out" 2>"$WORK/$name.log" &
    pid=$!
    PIDS+=("$pid")
    url=""
    for _ in $(seq 100); do
        url="$(grep -o -m1 'listening on http://[^ ]*' "$WORK/$name.log" 2>/dev/null | cut -d' ' -f3 || true)"
        [[ -n "$url" ]] && break
        kill -0 "$pid" 2>/dev/null || die "replica $name exited early (see $WORK/$name.log)"
        sleep 0.1
    done
    [[ -n "$url" ]] || die "replica $name did not announce its address (see $WORK/$name.log)"
    NAMES+=("$name") URLS+=("$url") RPIDS+=("$pid")
    log "replica $name: $url (pid $pid) ${args[*]}"
done

# haproxy: the committed template with this run's ports.
HPORT="$(free_port)"
servers=""
for i in "${!NAMES[@]}"; do
    hostport="${URLS[$i]#http://}"
    servers+="    server ${NAMES[$i]} ${hostport%%/*}"$'\n'
done
cfg="$(<"$ROOT/tests/scale/haproxy.cfg.in")"
cfg="${cfg//@BIND@/127.0.0.1:$HPORT}"
cfg="${cfg//@SERVERS@/$servers}"
if [[ "${SCALE_STICKY:-1}" == "0" ]]; then
    cfg="$(printf '%s\n' "$cfg" | grep -v '^    stick')"
    log "WARNING: SCALE_STICKY=0: no session stickiness"
fi
printf '%s\n' "$cfg" >"$WORK/haproxy.cfg"
haproxy -c -f "$WORK/haproxy.cfg" >"$WORK/haproxy-check.log" 2>&1 \
    || { cat "$WORK/haproxy-check.log" >&2; die "haproxy rejected $WORK/haproxy.cfg"; }
haproxy -db -f "$WORK/haproxy.cfg" >"$WORK/haproxy.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$HPORT") 2>/dev/null && break
    sleep 0.1
done
log "haproxy on http://127.0.0.1:$HPORT/mcp (config: ${WORK#"$ROOT"/}/haproxy.cfg)"

# ---- scenarios -------------------------------------------------------------------------------
replica_args=()
for i in "${!NAMES[@]}"; do
    replica_args+=(--replica "${NAMES[$i]}=${URLS[$i]}=${RPIDS[$i]}")
done
rc=0
timeout --kill-after=10 "${SCALE_TIMEOUT:-150}" "$VENV/bin/python" "$ROOT/tests/scale/scenarios.py" \
    --proxy "http://127.0.0.1:$HPORT/mcp" "${replica_args[@]}" --cluster "$CLUSTER_ARGS" 2>&1 \
    | tee "$WORK/scenarios.log" || rc=$?
[[ $rc -eq 124 || $rc -eq 137 ]] && echo "scale: scenarios timed out after ${SCALE_TIMEOUT:-150}s"
if [[ $rc -ne 0 ]]; then
    echo "scale: FAILED (logs in ${WORK#"$ROOT"/}/)"
    exit 1
fi
echo "scale: all scenarios passed"

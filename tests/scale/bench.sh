#!/usr/bin/env bash
# Throughput through haproxy: one vs three replicas of the everything example (`--bench`
# catalogue: echo and add, as the peers have it), with and without a shared Redis, and the
# same for rmcp's bench peer, with mcpload from ../shared/bench (echo and list, 16 clients,
# Streamable HTTP, one 2025-06-18 session per client, which haproxy sticks to one replica).
# Not run in CI.
#
# Usage: bash tests/scale/bench.sh [BIN]
#   BIN       default target/release/examples/everything (cargo build --release -p mcp-tokio --example everything)
#   BENCH     a built copy of ../shared/bench (default /tmp/bench: mcpload and peers/rmcp built in release)
#   DURATION  measured seconds per cell (default 5), WARMUP (default 1)
# Prints one table row per cell; logs in target/scale-bench/.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$(pwd)"
BIN="${1:-target/release/examples/everything}"
case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
BENCH="${BENCH:-/tmp/bench}"
MCPLOAD="$BENCH/mcpload/target/release/mcpload"
RMCP="$BENCH/peers/rmcp/target/release/rmcp-peer"
WORK="$ROOT/target/scale-bench"
DURATION="${DURATION:-5}"
WARMUP="${WARMUP:-1}"

die() { printf 'scale-bench: error: %s\n' "$*" >&2; exit 1; }
[[ -x "$BIN" ]] || die "no $BIN"
[[ -x "$MCPLOAD" ]] || die "no $MCPLOAD (build ../shared/bench's mcpload in release)"
[[ -x "$RMCP" ]] || die "no $RMCP (build ../shared/bench's rmcp peer in release)"

rm -rf "$WORK"
mkdir -p "$WORK"
declare -a PIDS=()
stop_all() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    PIDS=()
}
REDIS_PID=""
trap 'stop_all; [[ -z "$REDIS_PID" ]] || kill "$REDIS_PID" 2>/dev/null || true' EXIT

# shellcheck source=tests/scale/common.sh
source "$ROOT/tests/scale/common.sh"
wait_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    die "nothing listens on port $1"
}

start_redis "$WORK"

# setup: peer (ours | ours+redis | rmcp) and replica count; starts them and haproxy, prints the URL.
start() {
    local peer="$1" n="$2" direct="${3:-0}" servers="" i port
    for i in $(seq 1 "$n"); do
        port="$(free_port)"
        case "$peer" in
            ours) "$BIN" --bench --http "127.0.0.1:$port" 2>"$WORK/$peer-$n-r$i.log" & ;;
            ours+redis)
                "$BIN" --bench --http "127.0.0.1:$port" --cluster "redis://127.0.0.1:$RPORT" --replica "r$i" \
                    2>"$WORK/$peer-$n-r$i.log" &
                ;;
            rmcp) "$RMCP" http "$port" 2>"$WORK/$peer-$n-r$i.log" & ;;
        esac
        PIDS+=($!)
        wait_port "$port"
        servers+="    server r$i 127.0.0.1:$port"$'\n'
    done
    if [[ "$direct" == "1" ]]; then
        HPORT="$port" # no haproxy: the baseline the proxy's cost is read against
        return
    fi
    HPORT="$(free_port)"
    cfg="$(<"$ROOT/tests/scale/haproxy.cfg.in")"
    cfg="${cfg//@BIND@/127.0.0.1:$HPORT}"
    cfg="${cfg//@SERVERS@/$servers}"
    # No per-request log lines: they would cost haproxy time the table would count.
    printf '%s\n' "$cfg" | grep -v 'option httplog' >"$WORK/haproxy-$peer-$n.cfg"
    haproxy -db -f "$WORK/haproxy-$peer-$n.cfg" >"$WORK/haproxy-$peer-$n.log" 2>&1 &
    PIDS+=($!)
    wait_port "$HPORT"
}

printf '%-11s %8s %5s %5s %9s %8s %8s %8s\n' peer replicas load conc rps p50_us p99_us failures
# "direct": one replica, no haproxy.
setups=("ours direct" "ours 1" "ours 3" "rmcp direct" "rmcp 1" "rmcp 3")
help="$("$BIN" --help 2>&1 || true)" # exits non-zero: read its text
[[ "$help" == *--cluster* ]] && setups+=("ours+redis direct" "ours+redis 1" "ours+redis 3")
for setup in "${setups[@]}"; do
    read -r peer n <<<"$setup"
    if [[ "$n" == "direct" ]]; then start "$peer" 1 1; else start "$peer" "$n"; fi
    for load in echo list; do
        line="$("$MCPLOAD" --http "http://127.0.0.1:$HPORT/mcp" --workload "$load" --concurrency 16 \
            --duration "$DURATION" --warmup "$WARMUP" 2>>"$WORK/mcpload.log" || echo "requests=ERROR")"
        get() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$line"; }
        printf '%-11s %8s %5s %5s %9s %8s %8s %8s\n' "$peer" "$n" "$load" 16 \
            "$(get rps)" "$(get p50_us)" "$(get p99_us)" "$(get failures)"
    done
    stop_all
done
kill "$REDIS_PID" 2>/dev/null || true
wait "$REDIS_PID" 2>/dev/null || true

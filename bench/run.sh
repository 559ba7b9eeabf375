#!/usr/bin/env bash
# This library's benchmarks, side by side with the peers of ../shared/bench, in one run: the
# data behind docs/benchmarks.md and its charts (bench/charts.py draws them).
#
#   bash bench/run.sh matrix     # every row: stdio and http x echo/list/ping x concurrency 1, 16
#   bash bench/run.sh startup    # exec to the first answered initialize, per peer
#   bash bench/run.sh idle       # memory per idle legacy session and per idle GET stream (N of each)
#   bash bench/run.sh soak       # 10 minutes of HTTP load with abandoned sessions, streams, tasks
#   bash bench/run.sh shards     # HTTP c=64 with 1, 2, ... engines (SHARDS), server and load pinned
#   bash bench/run.sh all        # all of the above
#
# Knobs (env, defaults in brackets): PEERS [tokio smol rmcp null], ROUNDS [3], DURATION [5],
# WARMUP [1], WORKLOADS [echo list ping], TRANSPORTS [stdio http], CONCURRENCY [1 16],
# IDLE_N [10000], SOAK_SECS [600], SOAK_EVERY [10], STARTUP_RUNS [20],
# SHARDS [1 2], SHARD_PEERS [tokio smol], SHARD_CONC [64], SHARD_WORKLOAD [echo],
# SERVER_CPUS [every CPU], LOAD_CPUS [the last CPU], SHARD_THREADS [the count of SERVER_CPUS],
# HARNESS [../shared/bench], OUT [target/bench] (raw results, one file per subcommand, in the
# formats bench/charts.py reads; copy them to docs/bench/data to publish).
#
# Peers: `tokio` and `smol` are the bench example of each shim (the everything example's `--bench`
# catalogue in a binary of its own, as each peer of ../shared/bench is one: see
# examples/common/bench.rs), built with the `dist` profile; `everything` is the tokio everything
# example with `--bench` (every feature of the demo linked in); `rmcp`, `null`, `ts` and `py` are
# ../shared/bench's. idle, soak and shards run the everything examples, whose options they use.
# Every run gets a fresh server process; within a cell the peers take turns, rotating who goes
# first, so drift in the machine's noise is shared.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
HARNESS_SRC=${HARNESS:-$ROOT/../shared/bench}
OUT=${OUT:-$ROOT/target/bench}
PEERS=${PEERS-"tokio smol rmcp null"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
WORKLOADS=${WORKLOADS:-"echo list ping"}
TRANSPORTS=${TRANSPORTS:-"stdio http"}
CONCURRENCY=${CONCURRENCY:-"1 16"}
IDLE_N=${IDLE_N:-10000}
SOAK_SECS=${SOAK_SECS:-600}
SOAK_EVERY=${SOAK_EVERY:-10}
STARTUP_RUNS=${STARTUP_RUNS:-20}
PAYLOAD_BYTES=${PAYLOAD_BYTES:-64}
port=${PORT_BASE:-18400}

log() { echo "bench: $*" >&2; }
die() { log "error: $*"; exit 1; }

# ------------------------------------------------------------------------------------ build

# The harness is copied out of ../shared (read-only on CI machines) and built in the copy.
HARNESS=$ROOT/target/bench-harness
MCPLOAD=$HARNESS/mcpload/target/release/mcpload
build_harness() {
    [[ -d $HARNESS_SRC/mcpload ]] || die "no load generator in $HARNESS_SRC (set HARNESS)"
    if [[ ! -d $HARNESS/mcpload ]]; then
        mkdir -p "$HARNESS"
        (cd "$HARNESS_SRC" && tar --exclude=target --exclude=node_modules --exclude=.venv -cf - .) |
            (cd "$HARNESS" && tar -xf -)
    fi
    log "building mcpload..."
    cargo build --release --quiet --manifest-path "$HARNESS/mcpload/Cargo.toml"
    local p
    for p in $PEERS; do
        case $p in
            null | rmcp) log "building peer $p..."
                cargo build --release --quiet --manifest-path "$HARNESS/peers/$p/Cargo.toml" ;;
            ts) [[ -d $HARNESS/peers/ts/node_modules/@modelcontextprotocol/sdk ]] ||
                    (cd "$HARNESS/peers/ts" && npm ci --silent --no-audit --no-fund) ;;
            py) "$HARNESS/peers/py/.venv/bin/python" -c 'import mcp' 2>/dev/null ||
                    { python3 -m venv "$HARNESS/peers/py/.venv" &&
                      "$HARNESS/peers/py/.venv/bin/pip" install -q -r "$HARNESS/peers/py/requirements.txt"; } ;;
        esac
    done
    log "building the bench and everything examples (dist profile)..."
    cargo build --profile dist --quiet --locked -p mcp-tokio --example bench --example everything
    cargo build --profile dist --quiet --locked -p mcp-smol --example bench-smol --example everything-smol
    log "building the startup and idle-cost probes..."
    cargo build --release --quiet --locked -p mcp-tests --bin startup-time --bin idle-cost --bin soak
}

TOKIO=$ROOT/target/dist/examples/everything
SMOL=$ROOT/target/dist/examples/everything-smol
BENCH_TOKIO=$ROOT/target/dist/examples/bench
BENCH_SMOL=$ROOT/target/dist/examples/bench-smol
STARTUP=$ROOT/target/release/startup-time
IDLE=$ROOT/target/release/idle-cost
SOAK=$ROOT/target/release/soak

# stdio_cmd PEER / http_cmd PEER PORT: the command that starts PEER.
stdio_cmd() {
    case $1 in
        tokio) echo "$BENCH_TOKIO" ;;
        smol) echo "$BENCH_SMOL" ;;
        everything) echo "$TOKIO --bench" ;;
        everything-smol) echo "$SMOL --bench" ;;
        null) echo "$HARNESS/peers/null/target/release/null-peer stdio" ;;
        rmcp) echo "$HARNESS/peers/rmcp/target/release/rmcp-peer stdio" ;;
        ts) echo "node $HARNESS/peers/ts/server.mjs stdio" ;;
        py) echo "$HARNESS/peers/py/.venv/bin/python $HARNESS/peers/py/server.py stdio" ;;
        *) die "unknown peer $1" ;;
    esac
}
http_cmd() {
    case $1 in
        tokio) echo "$BENCH_TOKIO --http 127.0.0.1:$2" ;;
        smol) echo "$BENCH_SMOL --http 127.0.0.1:$2" ;;
        everything) echo "$TOKIO --bench --http 127.0.0.1:$2" ;;
        everything-smol) echo "$SMOL --bench --http 127.0.0.1:$2" ;;
        null) echo "$HARNESS/peers/null/target/release/null-peer http $2" ;;
        rmcp) echo "$HARNESS/peers/rmcp/target/release/rmcp-peer http $2" ;;
        ts) echo "node $HARNESS/peers/ts/server.mjs http $2" ;;
        py) echo "$HARNESS/peers/py/.venv/bin/python $HARNESS/peers/py/server.py http $2" ;;
        *) die "unknown peer $1" ;;
    esac
}

# ------------------------------------------------------------------------------------ runs

server_pid=""
stop_server() {
    [[ -n $server_pid ]] || return 0
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 30); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# start_http PEER [PREFIX [ARGS]]: starts PEER on the next port, its command after PREFIX
# (taskset, say) and with ARGS appended; sets server_pid, server_log and url.
start_http() {
    local cmd; cmd=$(http_cmd "$1" "$port")
    server_log=$OUT/logs/server-$1-$port.log
    sh -c "exec ${2:-} $cmd ${3:-}" >"$server_log" 2>&1 </dev/null &
    server_pid=$!
    url="http://127.0.0.1:$port/mcp"
    port=$((port + 1))
}

limit=$(awk "BEGIN { print int($DURATION + $WARMUP + 60) }")

# load PEER TRANSPORT WORKLOAD CONC: one mcpload run; prints its summary line (or ERROR).
load() {
    local peer=$1 transport=$2 workload=$3 conc=$4
    local name="$peer-$transport-$workload-c$conc"
    local args=(--workload "$workload" --concurrency "$conc" --duration "$DURATION" --warmup "$WARMUP"
                --payload-bytes "$PAYLOAD_BYTES")
    local gen=("$MCPLOAD")
    if [[ $transport == stdio ]]; then
        timeout -k 5 "$limit" "${gen[@]}" --stdio "$(stdio_cmd "$peer")" "${args[@]}" \
            2>"$OUT/logs/$name.log" || echo ERROR
    else
        start_http "$peer"
        local line
        line=$(timeout -k 5 "$limit" "${gen[@]}" --http "$url" --server-pid "$server_pid" "${args[@]}" \
                2>"$OUT/logs/$name.log") || line=ERROR
        stop_server
        echo "$line"
    fi
}

# The median of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# field NAME: the value of NAME=... on each line of stdin.
field() { grep -o "\b$1=[^ ]*" | cut -d= -f2; }

matrix() {
    local file=$OUT/matrix.txt cell=0 round transport workload conc i
    read -ra peers <<<"$PEERS"
    local n=${#peers[@]}
    header >"$file"
    log "matrix: peers $PEERS, $ROUNDS round(s) of ${DURATION}s after ${WARMUP}s warm-up -> $file"
    for ((round = 1; round <= ROUNDS; round++)); do
        for transport in $TRANSPORTS; do
            for workload in $WORKLOADS; do
                for conc in $CONCURRENCY; do
                    for ((i = 0; i < n; i++)); do
                        local peer=${peers[(i + cell) % n]}
                        local row; row="$peer $transport $workload $conc $(load "$peer" "$transport" "$workload" "$conc")"
                        echo "$row" >>"$file"
                        log "round $round: $row"
                    done
                    cell=$((cell + 1))
                done
            done
        done
    done
    table "$file"
}

# table FILE: one row per cell and peer: median rps, p50 and p99 over rounds, the largest peak
# RSS, the ratio to rmcp's and to null's median rps in the same cell.
table() {
    awk '
        /^#/ || NF < 5 { next }
        {
            key = $2 " " $3 " " $4; peer = $1
            if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
            if (!((key, peer) in had)) { had[key, peer] = 1; if (!(peer in pseen)) { pseen[peer] = 1; peers[++np] = peer } }
            if ($5 == "ERROR") { err[key, peer]++; next }
            for (i = 5; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            n = ++cnt[key, peer]
            rps[key, peer, n] = v["rps"] + 0; p50[key, peer, n] = v["p50_us"] + 0; p99[key, peer, n] = v["p99_us"] + 0
            if (v["server_peak_rss_kb"] != "na" && v["server_peak_rss_kb"] + 0 > rss[key, peer]) rss[key, peer] = v["server_peak_rss_kb"] + 0
        }
        function med(arr, key, peer, n,   a, i, j, t) {
            for (i = 1; i <= n; i++) a[i] = arr[key, peer, i]
            for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
            return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        END {
            fmt = "%-6s %-5s %-5s %4s %10s %8s %8s %8s %9s %9s %5s\n"
            printf fmt, "peer", "trans", "load", "conc", "rps", "p50_us", "p99_us", "rss_MiB", "x_rmcp", "of_null", "errs"
            for (k = 1; k <= nk; k++) {
                key = keys[k]; split(key, kp, " ")
                r_rmcp = cnt[key, "rmcp"] ? med(rps, key, "rmcp", cnt[key, "rmcp"]) : 0
                r_null = cnt[key, "null"] ? med(rps, key, "null", cnt[key, "null"]) : 0
                for (q = 1; q <= np; q++) {
                    peer = peers[q]; n = cnt[key, peer]
                    if (!n) { if ((key, peer) in had) printf fmt, peer, kp[1], kp[2], kp[3], "ERROR", "-", "-", "-", "-", "-", err[key, peer] + 0; continue }
                    m = med(rps, key, peer, n)
                    printf fmt, peer, kp[1], kp[2], kp[3], sprintf("%.0f", m), med(p50, key, peer, n), med(p99, key, peer, n),
                        rss[key, peer] ? sprintf("%.1f", rss[key, peer] / 1024) : "na",
                        r_rmcp ? sprintf("%.2fx", m / r_rmcp) : "-", r_null ? sprintf("%.0f%%", 100 * m / r_null) : "-", err[key, peer] + 0
                }
            }
        }' "$1"
}

header() {
    echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git -C "$ROOT" rev-parse --short HEAD) on $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "# rounds=$ROUNDS duration_s=$DURATION warmup_s=$WARMUP payload_bytes=$PAYLOAD_BYTES"
}

# idle: what N idle connections, N idle legacy sessions and then one idle GET stream on each
# add to a server's resident set (tests/src/bin/idle-cost.rs), for both shims and for
# ../shared/bench's rmcp peer (with rmcp's defaults).
idle() {
    local file=$OUT/idle.txt peer bin
    header >"$file"
    local want=$((IDLE_N * 2 + 1024)) hard; hard=$(ulimit -Hn)
    [[ $hard == unlimited ]] || ((want <= hard)) || want=$hard
    ulimit -n "$want" || log "idle: could not raise the open-file limit to $want"
    for peer in tokio smol rmcp; do
        local how=()
        case $peer in tokio) bin=$TOKIO ;; smol) bin=$SMOL ;; rmcp) bin=$HARNESS/peers/rmcp/target/release/rmcp-peer how=(--rmcp) ;; esac
        local line; line=$("$IDLE" "${how[@]}" "$bin" "$IDLE_N" | tr '\n' ' ') || line=ERROR
        echo "$peer $line" >>"$file"
        log "idle $peer: $line"
    done
}

# soak: SOAK_SECS of HTTP load on the tokio everything example with abandoned sessions, dropped
# GET streams and expiring tasks, the resident set sampled every SOAK_EVERY seconds
# (tests/src/bin/soak.rs).
soak() {
    local file=$OUT/soak.txt
    header >"$file"
    log "soak: ${SOAK_SECS}s, a sample every ${SOAK_EVERY}s -> $file"
    "$SOAK" "$TOKIO" "$SOAK_SECS" "$SOAK_EVERY" | tee -a "$file" >&2
}

# startup: exec to the first answered initialize (mcpload's handshake over stdio, timed here).
startup() {
    local file=$OUT/startup.txt peer i
    header >"$file"
    echo "# milliseconds from exec to the answer to initialize over stdio" >>"$file"
    for ((i = 1; i <= STARTUP_RUNS; i++)); do
        for peer in $PEERS; do
            local ms; ms=$("$STARTUP" $(stdio_cmd "$peer")) || ms=ERROR
            echo "$peer ms=$ms" >>"$file"
        done
    done
    for peer in $PEERS; do log "startup $peer: median $(grep "^$peer " "$file" | field ms | median) ms"; done
}

# shards: HTTP SHARD_WORKLOAD at SHARD_CONC clients against the everything example of each
# SHARD_PEERS with each count of SHARDS engines (`--shards N`), every run with the same
# SHARD_THREADS runtime threads so that the shard count is the only change; the server runs on
# SERVER_CPUS and mcpload on LOAD_CPUS (taskset). Each run also records how long each shard's
# engine was busy against how long it was up (printed by `--bench` at shutdown): the driver's
# share of a core. On a larger machine, e.g. SERVER_CPUS=0-15 LOAD_CPUS=16-31 SHARDS="1 2 4 8 16".
shards() {
    local file=$OUT/shards.txt round n peer last; last=$(($(nproc) - 1))
    local server_cpus=${SERVER_CPUS:-0-$last} load_cpus=${LOAD_CPUS:-$last}
    local threads=${SHARD_THREADS:-$(taskset -c "$server_cpus" nproc)}
    local conc=${SHARD_CONC:-64} workload=${SHARD_WORKLOAD:-echo}
    header >"$file"
    echo "# server_cpus=$server_cpus load_cpus=$load_cpus threads=$threads workload=$workload conc=$conc" >>"$file"
    log "shards: ${SHARDS:-1 2} engine(s), server on CPUs $server_cpus, mcpload on $load_cpus -> $file"
    for ((round = 1; round <= ROUNDS; round++)); do
        for n in ${SHARDS:-1 2}; do
            for peer in ${SHARD_PEERS:-tokio smol}; do
                # The everything example of the shim: the bench example takes no options.
                local example; case $peer in tokio) example=everything ;; smol) example=everything-smol ;; *) example=$peer ;; esac
                start_http "$example" "taskset -c $server_cpus" "--shards $n --threads $threads --capacity 4096"
                local line
                line=$(timeout -k 5 "$limit" taskset -c "$load_cpus" "$MCPLOAD" --http "$url" \
                        --server-pid "$server_pid" --workload "$workload" --concurrency "$conc" \
                        --duration "$DURATION" --warmup "$WARMUP" --payload-bytes "$PAYLOAD_BYTES" \
                        2>"$OUT/logs/shards-$peer-$n.log") || line=ERROR
                # The server's CPU time (user + system, all threads) over its life, in ms.
                local cpu; cpu=$(awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.0f", ($12 + $13) * 1000 / hz }' \
                        "/proc/$server_pid/stat" 2>/dev/null) || cpu=na
                stop_server
                # The busiest shard's share of a core over the server's life, in percent.
                local busy; busy=$(awk '/engine_busy_ms=/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                        if (v["up_ms"] > 0 && 100 * v["engine_busy_ms"] / v["up_ms"] > m) m = 100 * v["engine_busy_ms"] / v["up_ms"] }
                        END { printf "%.1f", m }' "$server_log")
                local busy_ms; busy_ms=$(awk '/engine_busy_ms=/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "engine_busy_ms") t += kv[2] } }
                        END { print t + 0 }' "$server_log")
                echo "$peer $n $line driver_pct=$busy engine_busy_ms=$busy_ms server_cpu_ms=$cpu" >>"$file"
                log "round $round: $peer shards=$n $line driver_pct=$busy engine_busy_ms=$busy_ms server_cpu_ms=$cpu"
            done
        done
    done
    awk '/^#/ || NF < 3 { next }
        { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
          k = $1 " " $2; if (!(k in c)) ks[++nk] = k; c[k]++; r[k] = r[k] " " v["rps"]; d[k] = d[k] " " v["driver_pct"] }
        END { for (i = 1; i <= nk; i++) printf "%-6s shards=%-3s rps:%s  driver%%:%s\n", substr(ks[i], 1, index(ks[i], " ") - 1), substr(ks[i], index(ks[i], " ") + 1), r[ks[i]], d[ks[i]] }' "$file" >&2
}

main() {
    mkdir -p "$OUT/logs"
    build_harness
    case ${1:-matrix} in
        matrix) matrix ;;
        startup) startup ;;
        idle) idle ;;
        soak) soak ;;
        shards) shards ;;
        all) matrix; startup; idle; soak; shards ;;
        *) die "unknown subcommand ${1}; see the top of $0" ;;
    esac
}
main "$@"

# Sourced by tests/scale/run.sh and bench.sh: what both need to stand up their parts.
# Needs `die` defined by the sourcing script.

# A free TCP port on loopback (the kernel's pick; free when printed).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_redis DIR: redis-server on loopback only, no persistence (no RDB snapshots, no AOF),
# working in DIR and logging to $2 (default DIR/redis.log). Sets
# RPORT and REDIS_PID, and returns once it answers PING (dies after 5 s).
start_redis() {
    local dir="$1" logfile="${2:-$1/redis.log}"
    RPORT="$(free_port)"
    redis-server --bind 127.0.0.1 --port "$RPORT" --save '' --appendonly no --dir "$dir" \
        --logfile "$logfile" --daemonize no &
    REDIS_PID=$!
    for _ in $(seq 50); do
        redis-cli -p "$RPORT" ping 2>/dev/null | grep -q PONG && return 0
        sleep 0.1
    done
    die "redis-server did not answer on port $RPORT (see $logfile)"
}

#!/usr/bin/env python3
"""Hostile floods against the everything example, each beside a well-behaved second caller.

Not part of CI (it takes a few minutes and measures memory): run by hand after a build of the
example, and quote its table in the closing note of an availability issue.

    cargo build -p mcp-tokio --example everything -p mcp-smol --example everything-smol
    python3 tests/floods/run.py target/debug/examples/everything [target/debug/examples/everything-smol]

Each flood starts a fresh server over Streamable HTTP on loopback. The attacker connects from
127.0.0.2, the second caller from 127.0.0.1 (an anonymous caller is bound to its address, so
they are two callers). For each flood it prints whether the second caller was served throughout
(every request answered as it would be on an idle server) and the server's peak resident set
(VmHWM). The stdio flood writes 20,000 lines without reading and reports whether the server
closed the session (the documented bound) rather than blocking for ever.

Two cluster floods run for a binary whose --help lists --cluster (the smol example has it too):
each starts its own redis-server (needs redis-server on PATH; Debian: apt-get install
redis-server; loopback only, no persistence) and two replicas A and B sharing it. The second
caller's legacy (2025-11-25, Mcp-Session-Id) session lives on A.

- forward saturation: the attacker opens legacy sessions on A, then holds 264 slow_compute
  calls for them through B, each on its own connection, so B forwards each to A on a connection
  of its own (B turns away those past its 256 per-address share). While they are held the second
  caller calls echo for its session through B and directly on A, then through B again once the
  attack stopped. Served means every request answered 200 with a result (a 429 or 503 counts as
  not served); a 404 through B afterwards would mean the session was lost.
- redis pause: redis-server is stopped (SIGSTOP) for 3 s while the second caller calls echo for
  its session through B; expected a 503 with Retry-After for each, never a 404; after SIGCONT
  every call through B must be served again.

Their rows give A's peak resident set in the column and A's, B's and redis-server's (VmHWM,
and redis's own used_memory_peak) in the detail.

Requests are bounded in count and time, and go to loopback only; every process started is
stopped at the end of its flood.
"""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ATTACKER = "127.0.0.2"
VICTIM = "127.0.0.1"
MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}


def start(binary, *args, http="127.0.0.1:0"):
    proc = subprocess.Popen(
        [binary, "--http", http, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 20
    while time.time() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"listening on http://([^/ ]+)/mcp", line or "")
        if m:
            # Keep draining stderr so the server never blocks on it.
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            host, port = m.group(1).rsplit(":", 1)
            return proc, (host, int(port))
    proc.kill()
    raise SystemExit(f"{binary} announced no URL")


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


class Conn:
    """One keep-alive HTTP/1.1 connection from `source`."""

    def __init__(self, addr, source):
        self.addr, self.source = addr, source
        self.c = None

    def call(self, method, params, rid=1, timeout=30):
        params = dict(params)
        params["_meta"] = MODERN
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": method,
        }
        name = params.get("name") or params.get("taskId")
        if name:
            headers["Mcp-Name"] = name
        for attempt in range(2):
            if self.c is None:
                self.c = http.client.HTTPConnection(*self.addr, timeout=timeout, source_address=(self.source, 0))
            try:
                self.c.request("POST", "/mcp", body=body, headers=headers)
                r = self.c.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.c.close()
                    self.c = None
                break
            except (ConnectionError, http.client.HTTPException, OSError):
                self.c.close()
                self.c = None
                if attempt:
                    return r_status_error("connection failed")
        text = data.decode("utf-8", "replace")
        if text.startswith("event:") or text.startswith("id:") or "\ndata:" in text or text.startswith("data:"):
            datas = [l[5:].strip() for l in text.splitlines() if l.startswith("data:") and l[5:].strip()]
            text = datas[-1] if datas else "{}"
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, {"raw": text[:200]}


def r_status_error(msg):
    return 0, {"error": {"message": msg}}


def victim_task(addr):
    """The second caller starts a short task and reads it back: served or not, and why."""
    c = Conn(addr, VICTIM)
    status, r = c.call("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0, "label": "victim"}})
    task = r.get("result", {}).get("taskId")
    if not task:
        return False, f"{status} {json.dumps(r)[:160]}"
    for _ in range(200):
        status, g = c.call("tasks/get", {"taskId": task}, rid=2)
        if g.get("result", {}).get("status") == "completed":
            return True, "task completed"
        time.sleep(0.02)
    return False, f"task never completed: {json.dumps(g)[:160]}"


def victim_echo(addr, n=20):
    c = Conn(addr, VICTIM)
    lat = []
    for i in range(n):
        t = time.time()
        status, r = c.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, rid=i + 1)
        lat.append(time.time() - t)
        if "result" not in r:
            return False, f"echo refused: {status} {json.dumps(r)[:160]}", lat
    return True, "echo answered", lat


def flood_task_table(binary):
    proc, addr = start(binary)
    try:
        a = Conn(addr, ATTACKER)
        refused = 0
        for i in range(1100):
            _, r = a.call("tools/call", {"name": "slow_compute", "arguments": {"seconds": 600, "label": str(i)}}, rid=i + 1)
            if r.get("result", {}).get("resultType") != "task":
                refused += 1
        ok, why = victim_task(addr)
        return ok, f"attacker refused {refused}/1100; second caller: {why}", peak_rss_kib(proc.pid), None
    finally:
        proc.kill()


def flood_task_results(binary):
    proc, addr = start(binary)
    try:
        a = Conn(addr, ATTACKER)
        label = "x" * (1 << 20)
        kept = 0
        for i in range(400):
            _, r = a.call("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0, "label": label}}, rid=i + 1)
            if r.get("result", {}).get("resultType") == "task":
                kept += 1
        time.sleep(1)
        ok, why = victim_task(addr)
        return ok, f"attacker's 1 MiB tasks made: {kept}/400; second caller: {why}", peak_rss_kib(proc.pid), None
    finally:
        proc.kill()


def flood_search(binary, tool="search_tools"):
    """Two attacker connections send ~2 MiB `search_tools` queries (or, as the baseline, echoes
    of the same bytes) for 5 s while the second caller calls echo through call_tool."""
    proc, addr = start(binary, "--mode", "compact")
    try:
        query = " ".join(["word"] * 400_000)  # ~2 MiB of words
        stop = time.time() + 5
        sent = [0]
        if tool == "search_tools":
            attack_call = {"name": "search_tools", "arguments": {"query": query}}
        else:
            attack_call = {"name": "call_tool", "arguments": {"name": "echo", "arguments": {"text": query}}}

        def attack():
            a = Conn(addr, ATTACKER)
            while time.time() < stop:
                a.call("tools/call", attack_call, rid=1)
                sent[0] += 1

        threads = [threading.Thread(target=attack) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        c = Conn(addr, VICTIM)
        lat = []
        ok = True
        while time.time() < stop:
            t0 = time.time()
            _, r = c.call("tools/call", {"name": "call_tool", "arguments": {"name": "echo", "arguments": {"text": "hi"}}})
            lat.append(time.time() - t0)
            ok = ok and "result" in r
        for t in threads:
            t.join()
        lat.sort()
        median = lat[len(lat) // 2] * 1000 if lat else float("nan")
        return ok, f"{sent[0]} 2 MiB {tool} calls; second caller's median echo {median:.1f} ms over {len(lat)}", peak_rss_kib(proc.pid), None
    finally:
        proc.kill()


def flood_stdio(binary):
    proc = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}}}
    lines = [json.dumps(init)] + [json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}) for i in range(1, 20_000)]
    payload = ("\n".join(lines) + "\n").encode()
    written = [0]

    def write():
        try:
            proc.stdin.write(payload)
            proc.stdin.flush()
            written[0] = len(payload)
        except (BrokenPipeError, OSError):
            pass

    w = threading.Thread(target=write, daemon=True)
    w.start()
    # Never read stdout. The server must end the session within its stall timeout.
    deadline = time.time() + 90
    rss = 0
    while time.time() < deadline and proc.poll() is None:
        try:
            rss = max(rss, peak_rss_kib(proc.pid))
        except OSError:
            break
        time.sleep(0.2)
    ended = proc.poll() is not None
    if not ended:
        proc.kill()
    return ended, ("the server closed the session" if ended else "still blocked after 90 s"), rss, None


# ---- cluster floods: two replicas A and B of the example sharing one redis-server ------------

LEGACY = "2025-11-25"


def has_cluster_flags(binary):
    out = subprocess.run([binary, "--help"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20)
    return "--cluster" in out.stdout + out.stderr


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def redis_cmd(port, *args, timeout=2):
    """One RESP command to the redis-server on `port`; its reply as text (None on failure)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(f"*{len(args)}\r\n".encode() + b"".join(f"${len(a)}\r\n{a}\r\n".encode() for a in args))
            data = b""
            while True:
                chunk = s.recv(65536)
                data += chunk
                if not chunk or data.startswith((b"+", b"-", b":")) and data.endswith(b"\r\n"):
                    break
                m = re.match(rb"\$(-?\d+)\r\n", data)
                if m and (int(m.group(1)) < 0 or len(data) >= m.end() + int(m.group(1)) + 2):
                    break
            return data.decode("utf-8", "replace")
    except OSError:
        return None


class Cluster:
    """redis-server (no persistence, loopback only) and replicas A and B of `binary` sharing it."""

    def __init__(self, binary):
        self.dir = tempfile.TemporaryDirectory(prefix="floods-redis-")
        self.rport = free_port()
        self.redis = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.rport), "--save", "", "--appendonly", "no",
             "--dir", self.dir.name, "--logfile", os.path.join(self.dir.name, "redis.log"), "--daemonize", "no"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.replicas = {}
        try:
            for _ in range(50):
                if (redis_cmd(self.rport, "PING") or "").startswith("+PONG"):
                    break
                time.sleep(0.1)
            else:
                raise SystemExit("redis-server did not answer PING")
            for name in ("A", "B"):
                port = free_port()
                self.replicas[name] = start(
                    binary, "--cluster", f"redis://127.0.0.1:{self.rport}", "--replica", name,
                    "--advertise", f"http://127.0.0.1:{port}/mcp", http=f"127.0.0.1:{port}")
        except BaseException:
            self.stop()
            raise

    def addr(self, name):
        return self.replicas[name][1]

    def peaks(self):
        """Peak resident set (KiB) of A, B and redis-server, and redis's used_memory_peak (bytes)."""
        info = redis_cmd(self.rport, "INFO", "memory") or ""
        m = re.search(r"used_memory_peak:(\d+)", info)
        return (peak_rss_kib(self.replicas["A"][0].pid), peak_rss_kib(self.replicas["B"][0].pid),
                peak_rss_kib(self.redis.pid), int(m.group(1)) if m else 0)

    def peaks_text(self):
        a, b, r, used = self.peaks()
        return f"peak RSS A {a / 1024:.1f} / B {b / 1024:.1f} / redis {r / 1024:.1f} MiB (redis used_memory_peak {used / 1048576:.1f} MiB)"

    def stop(self):
        for proc, _ in self.replicas.values():
            proc.kill()
            proc.wait()
        try:
            self.redis.send_signal(signal.SIGCONT)
        except OSError:
            pass
        self.redis.kill()
        self.redis.wait()
        self.dir.cleanup()


def legacy_post(addr, source, message, session=None, timeout=10):
    """One legacy (2025-11-25) POST on a fresh connection from `source`: (status, headers, the
    JSON-RPC message answered or None). Status 0 when the connection failed or timed out."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Connection": "close",
    }
    if session:
        headers["Mcp-Session-Id"] = session
        headers["MCP-Protocol-Version"] = LEGACY
    c = http.client.HTTPConnection(*addr, timeout=timeout, source_address=(source, 0))
    try:
        c.request("POST", "/mcp", body=json.dumps(message), headers=headers)
        r = c.getresponse()
        data = r.read().decode("utf-8", "replace")
        hdrs = {k.lower(): v for k, v in r.getheaders()}
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        return 0, {"error": str(e)}, None
    finally:
        c.close()
    datas = [l[5:].strip() for l in data.splitlines() if l.startswith("data:") and l[5:].strip()]
    for text in reversed(datas or [data]):
        try:
            msg = json.loads(text)
        except ValueError:
            continue
        if isinstance(msg, dict) and ("result" in msg or "error" in msg):
            return r.status, hdrs, msg
    return r.status, hdrs, None


def legacy_session(addr, source):
    """Opens a legacy session on `addr` from `source`; its Mcp-Session-Id."""
    status, hdrs, msg = legacy_post(addr, source, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "floods", "version": "1"}}})
    sid = hdrs.get("mcp-session-id")
    if status != 200 or not sid:
        raise SystemExit(f"legacy initialize on {addr} from {source}: {status} {hdrs} {msg}")
    legacy_post(addr, source, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session=sid)
    return sid


class Tally:
    """What the victim's requests were answered: served (200 with a result) or not, by reason."""

    def __init__(self):
        self.served, self.total, self.why = 0, 0, {}
        self.lock = threading.Lock()

    def add(self, status, hdrs, msg):
        ok = status == 200 and msg is not None and "result" in msg
        if ok:
            key = None
        elif status in (429, 503):
            key = f"{status}{' Retry-After ' + hdrs['retry-after'] if 'retry-after' in hdrs else ' (no Retry-After)'}"
        elif status == 0:
            key = "connection failed"
        else:
            key = f"{status}" if msg is None else f"{status} {json.dumps(msg.get('error', msg))[:80]}"
        with self.lock:
            self.total += 1
            self.served += ok
            if key:
                self.why[key] = self.why.get(key, 0) + 1
        return ok

    def text(self):
        rest = "".join(f", {n}x {k}" for k, n in sorted(self.why.items()))
        return f"{self.served}/{self.total} served{rest}"

    def all_served(self):
        return self.total > 0 and self.served == self.total


def victim_echo_legacy(addr, sid, i):
    return legacy_post(addr, VICTIM, {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                      "params": {"name": "echo", "arguments": {"text": "hi"}}}, session=sid)


def hold_slow_calls(addr, sessions, n, seconds):
    """`n` legacy slow_compute calls from the attacker, spread over `sessions`, each on its own
    connection to `addr`, sent and then left unread (each held open until closed)."""
    socks = []
    for i in range(n):
        body = json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {
            "name": "slow_compute", "arguments": {"seconds": seconds, "label": f"a{i}"}}}).encode()
        head = (f"POST /mcp HTTP/1.1\r\nHost: {addr[0]}:{addr[1]}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nMcp-Session-Id: {sessions[i % len(sessions)]}\r\n"
                f"MCP-Protocol-Version: {LEGACY}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        s = socket.socket()
        s.settimeout(5)
        try:
            s.bind((ATTACKER, 0))
            s.connect(addr)
            s.sendall(head + body)
        except OSError:
            pass
        socks.append(s)
    return socks


def classify_held(socks):
    """What each held call got so far, by a peek at its socket: held (a 200 stream still open),
    refused (another status), closed, or nothing yet."""
    counts = {}
    for s in socks:
        try:
            s.setblocking(False)
            data = s.recv(65536, socket.MSG_PEEK)
            if not data:
                key = "closed"
            else:
                m = re.match(rb"HTTP/1\.1 (\d+)", data)
                key = "held 200" if m and m.group(1) == b"200" else f"answered {m.group(1).decode() if m else '?'}"
        except BlockingIOError:
            key = "no answer yet"
        except OSError:
            key = "reset"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def inbound_connections(port):
    """Established TCP connections to local `port`, by remote address (from /proc/net/tcp)."""
    counts = {}
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if state == "01" and int(local.split(":")[1], 16) == port:
                ip = socket.inet_ntoa(bytes.fromhex(remote.split(":")[0])[::-1])
                counts[ip] = counts.get(ip, 0) + 1
    return counts


def flood_forward_saturation(binary, n=264, sessions=8):
    """The attacker holds `n` slow calls on its legacy sessions held by A, sent through B (so B
    forwards each to A on a connection of its own) while the victim's legacy session, also on
    A, is used through B and directly; then through B again once the attack stopped."""
    cl = Cluster(binary)
    socks = []
    try:
        a, b = cl.addr("A"), cl.addr("B")
        sid = legacy_session(a, VICTIM)
        attacker = [legacy_session(a, ATTACKER) for _ in range(sessions)]
        # Idle baseline: the victim's session resolves through B before anything else happens.
        before = Tally()
        for i in range(3):
            before.add(*victim_echo_legacy(b, sid, i))
        socks = hold_slow_calls(b, attacker, n, seconds=30)
        time.sleep(2)
        held = classify_held(socks)
        on_a = inbound_connections(a[1])
        # The attacker's own share on A is taken by B's forwards: a direct call of its is turned away.
        probe, _, _ = legacy_post(a, ATTACKER, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, session=attacker[0], timeout=5)
        during_b, during_a = Tally(), Tally()
        stop = time.time() + 6
        i = 100
        while time.time() < stop and during_b.total < 60:
            during_b.add(*victim_echo_legacy(b, sid, i))
            during_a.add(*victim_echo_legacy(a, sid, i + 1))
            i += 2
        held_end = classify_held(socks)
        for s in socks:
            s.close()
        socks = []
        time.sleep(1)
        after = Tally()
        for j in range(10):
            after.add(*victim_echo_legacy(b, sid, 1000 + j))
        lost = after.why.get("404", 0) + during_b.why.get("404", 0)
        ok = before.all_served() and during_b.all_served() and during_a.all_served() and after.all_served()
        detail = (f"attacker's {n} slow calls through B on {sessions} sessions held by A: {held} "
                  f"(after the victim's run: {held_end}); connections into A: {on_a}; the attacker's own call direct to A: {probe or 'turned away'}; victim idle {before.text()}; during: through B "
                  f"{during_b.text()}, direct to A {during_a.text()}; after, through B {after.text()} "
                  f"({'session lost: 404' if lost else 'session still resolved'}); {cl.peaks_text()}")
        return ok, detail, cl.peaks()[0], None
    finally:
        for s in socks:
            s.close()
        cl.stop()


def flood_redis_pause(binary, pause=3.0):
    """redis-server is stopped (SIGSTOP) for `pause` seconds while the victim uses its legacy
    session, held by A, through B; then resumed (SIGCONT) and the session used through B again."""
    cl = Cluster(binary)
    try:
        a, b = cl.addr("A"), cl.addr("B")
        sid = legacy_session(a, VICTIM)
        before = Tally()
        for i in range(3):
            before.add(*victim_echo_legacy(b, sid, i))
        during, direct = Tally(), Tally()
        cl.redis.send_signal(signal.SIGSTOP)
        t0 = time.time()
        try:
            i = 100
            while time.time() < t0 + pause and during.total < 30:
                during.add(*victim_echo_legacy(b, sid, i))
                i += 1
            direct.add(*victim_echo_legacy(a, sid, i))
        finally:
            cl.redis.send_signal(signal.SIGCONT)
        resumed = time.time()
        after = Tally()
        first_served = None
        for j in range(40):
            t = time.time()
            if after.add(*victim_echo_legacy(b, sid, 1000 + j)) and first_served is None:
                first_served = t - resumed
            if first_served is not None and after.total >= 10 and j >= 10:
                break
            if first_served is None:
                time.sleep(0.25)
        tail = Tally()
        for j in range(5):
            tail.add(*victim_echo_legacy(b, sid, 2000 + j))
        lost = sum(t.why.get("404", 0) for t in (during, after, tail))
        # Served throughout: during the pause a 503 with Retry-After is the documented answer (not
        # a 404); after SIGCONT every request through B is served again.
        during_ok = during.total > 0 and all(k.startswith("503 Retry-After") for k in during.why)
        ok = before.all_served() and during_ok and tail.all_served() and lost == 0
        fs = f"{first_served:.2f} s" if first_served is not None else "never"
        detail = (f"redis stopped {resumed - t0:.1f} s; victim through B during the pause: "
                  f"{during.text()}; direct to A during the pause: {direct.text()}; after SIGCONT through B: "
                  f"{after.text()} (first served {fs} after SIGCONT), then {tail.text()}; "
                  f"{'session LOST: 404 seen' if lost else 'never a 404'}; {cl.peaks_text()}")
        return ok, detail, cl.peaks()[0], None
    finally:
        cl.stop()


def main():
    binaries = sys.argv[1:] or ["target/debug/examples/everything"]
    floods = [
        ("task table", flood_task_table),
        ("task results", flood_task_results),
        ("search queries", flood_search),
        ("echo of the same bytes", lambda b: flood_search(b, "echo")),
        ("write-before-read (stdio)", flood_stdio),
    ]
    cluster_floods = [
        ("forward saturation", flood_forward_saturation),
        ("redis pause", flood_redis_pause),
    ]
    print(f"{'binary':<16} {'flood':<28} {'second caller served':<22} {'peak RSS':>10}  detail")
    for binary in binaries:
        todo = list(floods)
        if has_cluster_flags(binary):
            todo += cluster_floods
        else:
            print(f"{os.path.basename(binary):<16} (no --cluster flag: the cluster floods are skipped)", flush=True)
        for name, flood in todo:
            ok, detail, rss, _ = flood(binary)
            rss_txt = f"{rss / 1024:.1f} MiB" if rss else "(exited)"
            print(f"{os.path.basename(binary):<16} {name:<28} {str(ok):<22} {rss_txt:>10}  {detail}", flush=True)


if __name__ == "__main__":
    main()

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

Requests are bounded in count and time, and go to loopback only.
"""

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time

ATTACKER = "127.0.0.2"
VICTIM = "127.0.0.1"
MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}


def start(binary, *args):
    proc = subprocess.Popen(
        [binary, "--http", "127.0.0.1:0", *args],
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


def main():
    binaries = sys.argv[1:] or ["target/debug/examples/everything"]
    floods = [
        ("task table", flood_task_table),
        ("task results", flood_task_results),
        ("search queries", flood_search),
        ("echo of the same bytes", lambda b: flood_search(b, "echo")),
        ("write-before-read (stdio)", flood_stdio),
    ]
    print(f"{'binary':<16} {'flood':<28} {'second caller served':<22} {'peak RSS':>10}  detail")
    for binary in binaries:
        for name, flood in floods:
            ok, detail, rss, _ = flood(binary)
            rss_txt = f"{rss / 1024:.1f} MiB" if rss else "(exited)"
            print(f"{os.path.basename(binary):<16} {name:<28} {str(ok):<22} {rss_txt:>10}  {detail}", flush=True)


if __name__ == "__main__":
    main()

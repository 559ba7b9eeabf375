#!/usr/bin/env python3
"""Floods a running `everything` HTTP server from one loopback address (127.0.0.2) while a
second address (127.0.0.1) keeps using it, and reports, per flood, how many of the second
address's tries succeeded and the server's peak RSS.

A measurement for humans (the availability issue's closing note), not a test: the pass/fail
versions of these floods are `tests/tests/http_shares.rs`, `interactions.rs` and the engine's
unit tests. Usage:

    cargo build --profile dist -p mcp-tokio --example everything
    python3 tests/flood/flood.py target/dist/examples/everything [port]

(`dist`: fat LTO and one codegen unit, as a deployed server is built; the peak RSS it reports
depends on the profile.)

Every flood runs against a fresh server process; the server's `VmHWM` is read at the end.
"""

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

FLOODER = "127.0.0.2"
VICTIM = "127.0.0.1"
LEGACY = "2025-06-18"


def conn(port, source, timeout=5.0):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0))


def post(c, body, session=None, version=LEGACY, accept="application/json, text/event-stream"):
    headers = {"Content-Type": "application/json", "Accept": accept, "MCP-Protocol-Version": version}
    if session:
        headers["Mcp-Session-Id"] = session
    c.request("POST", "/mcp", body=json.dumps(body), headers=headers)
    return c.getresponse()


def init_body(version=LEGACY, caps=None):
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": caps or {},
                       "clientInfo": {"name": "flood", "version": "1"}}}


def session(port, source, version=LEGACY, caps=None):
    """A finished handshake: the session id."""
    c = conn(port, source)
    r = post(c, init_body(version, caps), version=version)
    r.read()
    sid = r.getheader("Mcp-Session-Id")
    if r.status != 200 or not sid:
        c.close()
        raise RuntimeError(f"initialize: {r.status}")
    r2 = post(c, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid, version)
    r2.read()
    c.close()
    return sid


def victim_try(port):
    """The second address: initialize and call `echo`; True when it worked."""
    try:
        sid = session(port, VICTIM)
        c = conn(port, VICTIM)
        r = post(c, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"text": "hi"}}}, sid)
        body = r.read()
        c.close()
        return r.status == 200 and b'"hi"' in body
    except Exception:
        return False


def rss_peak(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def start(binary, port):
    p = subprocess.Popen([binary, "--http", f"127.0.0.1:{port}"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError("server did not start")


def victim_during(port, flood, tries=30, gap=0.1):
    """Runs `flood(stop)` on a thread and the victim's tries meanwhile."""
    stop = threading.Event()
    t = threading.Thread(target=flood, args=(stop,), daemon=True)
    t.start()
    time.sleep(1.0)  # let the flood fill what it fills
    ok = 0
    for _ in range(tries):
        ok += victim_try(port)
        time.sleep(gap)
    stop.set()
    t.join(timeout=10)
    return ok, tries


def flood_sessions(port):
    def flood(stop):
        n = 0
        while not stop.is_set() and n < 1100:
            try:
                session(port, FLOODER)
            except Exception:
                pass
            n += 1
    return victim_during(port, flood)


def flood_handshakes(port):
    def flood(stop):
        while not stop.is_set():
            try:
                c = conn(port, FLOODER)
                r = post(c, init_body())
                r.read()
                c.close()
            except Exception:
                pass
    return victim_during(port, flood)


def slow_heads(port, reconnect):
    def flood(stop):
        held = []
        def open_one():
            s = socket.socket()
            s.bind((FLOODER, 0))
            s.settimeout(2)
            s.connect(("127.0.0.1", port))
            s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            s.setblocking(False)
            return s
        while not stop.is_set() and len(held) < 1100:
            try:
                held.append(open_one())
            except Exception:
                break
        while not stop.is_set():
            for i, s in enumerate(held):
                try:
                    if s.recv(1) == b"":
                        raise ConnectionError
                except BlockingIOError:
                    continue
                except Exception:
                    s.close()
                    if reconnect:
                        try:
                            held[i] = open_one()
                        except Exception:
                            pass
            time.sleep(0.01)
        for s in held:
            s.close()
    return victim_during(port, flood)


def abandoned_asks(port):
    def flood(stop):
        sid = session(port, FLOODER, caps={"elicitation": {}})
        n = 0
        while not stop.is_set() and n < 200:
            try:
                c = conn(port, FLOODER)
                r = post(c, {"jsonrpc": "2.0", "id": 100 + n, "method": "tools/call",
                             "params": {"name": "test_elicitation", "arguments": {"message": "?"}}}, sid)
                r.read(64)  # the question arrives; then the stream is dropped unanswered
                c.close()
            except Exception:
                pass
            n += 1
    ok, tries = victim_during(port, flood)
    return ok, tries


def notification_burst(port):
    """A 2025-03-26 GET stream of the second address reads at full speed while the flooder's
    session triggers 20 tool-list changes in one batch, ten times over."""
    sid = session(port, VICTIM, version="2025-03-26")
    s = socket.create_connection(("127.0.0.1", port), source_address=(VICTIM, 0))
    s.sendall((f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
               f"Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-03-26\r\n\r\n").encode())
    s.settimeout(0.2)
    seen = bytearray()

    def read():
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    fsid = session(port, FLOODER, version="2025-03-26")
    for round_ in range(10):
        batch = [{"jsonrpc": "2.0", "id": round_ * 100 + i, "method": "tools/call",
                  "params": {"name": "test_trigger_tool_change", "arguments": {}}} for i in range(20)]
        c = conn(port, FLOODER)
        r = post(c, batch, fsid, version="2025-03-26")
        r.read()
        c.close()
    time.sleep(1.0)
    alive = reader.is_alive()
    changes = seen.count(b"notifications/tools/list_changed")
    s.close()
    return (1 if alive and changes > 0 else 0), 1, changes


def main():
    binary = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 18900
    floods = [
        ("sessions (1100 kept)", flood_sessions),
        ("unfinished handshakes", flood_handshakes),
        ("slow heads (1100 held)", lambda p: slow_heads(p, False)),
        ("reconnecting slow-loris", lambda p: slow_heads(p, True)),
        ("abandoned asks (200)", abandoned_asks),
        ("notification burst (10 x 20)", notification_burst),
    ]
    print(f"{'flood':32} {'second address served':>22} {'peak RSS MiB':>13}")
    for i, (name, run) in enumerate(floods):
        p = start(binary, port + i)
        try:
            result = run(port + i)
        finally:
            rss = rss_peak(p.pid)
            p.kill()
            p.wait()
        ok, tries = result[0], result[1]
        extra = f" ({result[2]} list_changed seen)" if len(result) > 2 else ""
        print(f"{name:32} {f'{ok}/{tries}':>22} {rss:13.1f}{extra}", flush=True)


if __name__ == "__main__":
    main()

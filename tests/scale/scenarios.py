"""Scale-out scenarios against replicas of the everything example behind haproxy.

Started by tests/scale/run.sh, which starts redis-server, the replicas and haproxy:

    python scenarios.py --proxy URL --replica NAME=URL=PID ... [--cluster 0|1]

Every scenario prints `ok` or `FAIL` with what it saw; the exit status is non-zero if any
failed. The official Python SDK (`mcp`) drives everything it can express; its HTTP client
(httpx2, which the SDK is built on) gets a response hook that records which replica answered
each request (haproxy's X-Replica header). Raw HTTP (httpx2, no SDK) only where the SDK has no
API: the Tasks extension (scenario 4: `tasks/get` has no SDK call) and sending one retry to
chosen replicas (scenario 6).

Scenarios:
  1 paging    a 2026-07-28 client pages tools/list through haproxy; each page comes from a
              different replica than the one before (sealed cursors verify on any replica)
  2 listen    a subscriptions/listen client connected straight to replica A receives the tools
              list_changed raised by toggling test_dynamic_tool on replica B
  3 legacy    a 2025-11-25 client (initialize, Mcp-Session-Id) keeps its session through haproxy
              across many requests, all served by one replica (haproxy stickiness); then the
              session's requests sent straight to the other replicas are served by the holder
              (forwarded: Mcp-Served-By)
  4 tasks     a slow_compute task created through haproxy on one replica is read with tasks/get
              on each other replica while it runs (forwarded to the holder) and once it has
              ended (the shared store); a second task is cancelled through a replica that does
              not run it
  6 retry     the first round of a 2026-07-28 input_required call (replica_counted_confirm)
              goes through haproxy; its retry is then sent straight to each replica: every
              replica answers the same, and the replicas' counts of completed runs
              (replica_status) grew by one in all (the shared replay ledger: one replica runs
              it, the others answer from its record; a copy that arrives before the record is
              refused in_progress and sent again)
  5 kill      clients keep calling echo through haproxy while one replica is SIGKILLed; every
              call succeeds (haproxy retries on conn-failure/empty-response, health checks drop
              the dead replica); run last, since it removes a replica
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import anyio
import httpx2
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged, listen
from mcp.shared._httpx_utils import create_mcp_http_client

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TASKS_EXT = "io.modelcontextprotocol/tasks"
STEP_TIMEOUT = float(os.environ.get("SCALE_STEP_TIMEOUT", "20"))
NOTIFY_TIMEOUT = float(os.environ.get("SCALE_NOTIFY_TIMEOUT", "5"))


class CheckFailed(Exception):
    pass


class Tap:
    """Records (Mcp-Method request header, X-Replica response header, status) per HTTP response."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, str | None, int]] = []
        self.session_id: str | None = None

    async def on_response(self, response: httpx2.Response) -> None:
        self.session_id = self.session_id or response.headers.get("mcp-session-id")
        self.seen.append(
            (response.request.headers.get("mcp-method"), response.headers.get("x-replica"), response.status_code)
        )

    def since(self, mark: int, method: str | None = None) -> list[tuple[str | None, str | None, int]]:
        return [s for s in self.seen[mark:] if method is None or s[0] == method]


async def accept_elicitation(_context: Any, params: Any) -> Any:
    return types.ElicitResult(action="accept", content={"name": "Scale"})


@asynccontextmanager
async def sdk_session(url: str, tap: Tap | None = None) -> AsyncIterator[ClientSession]:
    """An SDK client session over Streamable HTTP to `url`, its responses recorded by `tap`."""
    http = create_mcp_http_client()
    if tap is not None:
        http.event_hooks = {"request": [], "response": [tap.on_response]}
    async with http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write, elicitation_callback=accept_elicitation) as session:
                yield session


def text_of(result: Any) -> str:
    content = result.content if hasattr(result, "content") else result.get("content", [])
    texts = [getattr(c, "text", None) if not isinstance(c, dict) else c.get("text") for c in content]
    return " ".join(t for t in texts if t)


# ---- raw HTTP (what the SDK cannot express) -----------------------------------------------------

_ids = iter(range(1, 1_000_000))


async def raw_call(
    http: httpx2.AsyncClient, url: str, method: str, params: dict[str, Any], name: str | None = None
) -> tuple[dict[str, Any], str | None]:
    """One stateless 2026-07-28 request; returns the JSON-RPC response and the X-Replica header."""
    params = dict(params)
    meta = dict(params.get("_meta") or {})
    meta.setdefault("io.modelcontextprotocol/protocolVersion", MODERN)
    meta.setdefault("io.modelcontextprotocol/clientCapabilities", {"extensions": {TASKS_EXT: {}}})
    params["_meta"] = meta
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
    resp = await http.post(url, content=json.dumps(body), headers=headers)
    replica = resp.headers.get("x-replica")
    if resp.status_code != 200:
        raise CheckFailed(f"{method} on {url}: HTTP {resp.status_code}: {resp.text[:300]}")
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        # The response is the last `data:` of the stream that carries our id.
        msgs = [json.loads(line[5:]) for line in resp.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        msgs = [m for m in msgs if m.get("id") == body["id"]]
        if not msgs:
            raise CheckFailed(f"{method} on {url}: event stream without a response: {resp.text[:300]}")
        return msgs[-1], replica
    return resp.json(), replica


# ---- scenarios ------------------------------------------------------------------------------------


async def paging(o: argparse.Namespace) -> str:
    tap = Tap()
    async with sdk_session(o.proxy, tap) as s:
        await s.discover()
        if s.protocol_version != MODERN:
            raise CheckFailed(f"negotiated {s.protocol_version}, expected {MODERN}")
        cursor: str | None = None
        pages: list[tuple[int, str | None]] = []
        while True:
            mark = len(tap.seen)
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            try:
                res = await s.list_tools(params=params)
            except Exception as e:  # noqa: BLE001
                served = [r for _m, r, _s in tap.since(mark)]
                raise CheckFailed(f"page {len(pages) + 1} (served by {served}) failed: {e}; pages so far {pages}")
            served = [r for _m, r, _s in tap.since(mark, "tools/list")] or [r for _m, r, _s in tap.since(mark)]
            pages.append((len(res.tools), served[-1] if served else None))
            cursor = res.next_cursor
            if not cursor:
                break
            if len(pages) > 20:
                raise CheckFailed(f"more than 20 pages: {pages}")
    if len(pages) < 3:
        raise CheckFailed(f"only {len(pages)} page(s): {pages}; start the replicas with --extra-tools 250")
    replicas = [r for _n, r in pages]
    if None in replicas:
        raise CheckFailed(f"a page without X-Replica: {pages}")
    same = [i for i in range(1, len(replicas)) if replicas[i] == replicas[i - 1]]
    if same:
        raise CheckFailed(f"consecutive pages served by the same replica: {pages}")
    return f"{len(pages)} pages, {sum(n for n, _ in pages)} tools, served by {replicas}"


async def listen_fanout(o: argparse.Namespace) -> str:
    (a_name, a_url, _), (b_name, b_url, _) = o.replicas[0], o.replicas[1]
    async with sdk_session(a_url) as a, sdk_session(b_url) as b:
        await a.discover()
        await b.discover()
        async with listen(a, tools_list_changed=True) as sub:
            toggled = await b.call_tool("test_trigger_tool_change", {})
            if toggled.is_error:
                raise CheckFailed(f"toggle on {b_name} failed: {text_of(toggled)}")
            try:
                with anyio.fail_after(NOTIFY_TIMEOUT):
                    event = await sub.__anext__()
            except TimeoutError:
                raise CheckFailed(
                    f"listener on {a_name} got nothing within {NOTIFY_TIMEOUT}s of {b_name}: {text_of(toggled)!r}"
                )
            finally:
                # Put test_dynamic_tool back as it was, so the replicas' catalogues agree again.
                await b.call_tool("test_trigger_tool_change", {})
            if not isinstance(event, ToolsListChanged):
                raise CheckFailed(f"listener on {a_name} got {event!r}, expected ToolsListChanged")
    return f"listen on {a_name} got {type(event).__name__} after test_trigger_tool_change on {b_name}"


async def legacy_session(o: argparse.Namespace) -> str:
    tap = Tap()
    calls = 40
    async with sdk_session(o.proxy, tap) as s:
        init = await s.initialize()
        if init.protocol_version != LEGACY:
            raise CheckFailed(f"initialize negotiated {init.protocol_version}, expected {LEGACY}")
        for i in range(calls):
            if i % 10 == 0:
                tools = await s.list_tools()
                if not tools.tools:
                    raise CheckFailed("tools/list on the session is empty")
            res = await s.call_tool("echo", {"text": f"legacy {i}"})
            if text_of(res) != f"legacy {i}":
                raise CheckFailed(f"echo {i} answered {text_of(res)!r}")
        # The GET stream a legacy client opens, if any, counts too.
        seen = list(tap.seen)
        replicas = sorted({r for _m, r, _s in seen if r is not None})
        statuses = sorted({st for _m, _r, st in seen})
        if len(replicas) != 1:
            raise CheckFailed(f"the session's {len(seen)} requests were served by {replicas}, expected one replica")
        if any(st >= 400 for st in statuses):
            raise CheckFailed(f"HTTP statuses {statuses}")
        holder = replicas[0]
        # Stickiness saves a hop, nothing more: the session's requests sent straight to the other
        # replicas (while the SDK session still holds it open) are forwarded to the one holding
        # it, which Mcp-Served-By names.
        forwarded = await send_elsewhere(o, s_session_id(tap), holder)
    return (f"{calls} echo calls + {calls // 10} tools/list on one session, {len(seen)} HTTP responses, all from "
            f"{holder}; sent to {forwarded} directly, served by {holder}")


async def send_elsewhere(o: argparse.Namespace, session_id: str, holder: str) -> list[str]:
    """Sends an echo of the legacy session `session_id` to every replica but `holder`."""
    forwarded: list[str] = []
    async with httpx2.AsyncClient(timeout=STEP_TIMEOUT) as http:
        for name, url, _pid in o.replicas:
            if name == holder:
                continue
            body = {"jsonrpc": "2.0", "id": next(_ids), "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": f"via {name}"}}}
            headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                       "MCP-Protocol-Version": LEGACY, "Mcp-Session-Id": session_id}
            resp = await http.post(url, content=json.dumps(body), headers=headers)
            if resp.status_code != 200:
                raise CheckFailed(f"the session's echo sent to {name}: HTTP {resp.status_code}: {resp.text[:300]}")
            served_by = resp.headers.get("mcp-served-by")
            if served_by != holder:
                raise CheckFailed(f"the session's echo sent to {name} was served by {served_by!r}, expected {holder}")
            if f"via {name}" not in resp.text:
                raise CheckFailed(f"the session's echo sent to {name} answered {resp.text[:300]}")
            forwarded.append(name)
    return forwarded


def s_session_id(tap: "Tap") -> str:
    """The Mcp-Session-Id the tapped session was given."""
    if tap.session_id is None:
        raise CheckFailed("the session was given no Mcp-Session-Id")
    return tap.session_id


async def tasks_shared(o: argparse.Namespace) -> str:
    urls = {name: url for name, url, _ in o.replicas}
    async with httpx2.AsyncClient(timeout=STEP_TIMEOUT) as http:
        created, creator = await raw_call(
            http, o.proxy, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 2, "label": "scale"}}, "slow_compute"
        )
        result = created.get("result") or {}
        if result.get("resultType") != "task" or not result.get("taskId"):
            raise CheckFailed(f"slow_compute through haproxy did not start a task: {json.dumps(created)[:300]}")
        task_id = result["taskId"]
        if creator not in urls:
            raise CheckFailed(f"task created by unknown replica {creator!r}")
        # While it runs, the other replicas forward tasks/get to the one running it.
        running_on: list[str] = []
        for name, url in urls.items():
            if name == creator:
                continue
            got, _ = await raw_call(http, url, "tasks/get", {"taskId": task_id}, task_id)
            status = (got.get("result") or {}).get("status")
            if status not in ("working", "input_required"):
                raise CheckFailed(f"tasks/get on {name} while it runs on {creator}: {json.dumps(got)[:300]}")
            running_on.append(name)
        # Wait for the end on the replica that runs it.
        deadline = time.monotonic() + 10
        while True:
            got, _ = await raw_call(http, urls[creator], "tasks/get", {"taskId": task_id}, task_id)
            if "error" in got:
                raise CheckFailed(f"tasks/get on {creator}, which created it: {json.dumps(got['error'])[:300]}")
            status = got["result"].get("status")
            if status not in ("working", "input_required"):
                break
            if time.monotonic() > deadline:
                raise CheckFailed(f"task still {status} on {creator} after 10s")
            await anyio.sleep(0.2)
        read_on: list[str] = []
        for name, url in urls.items():
            if name == creator:
                continue
            got, _ = await raw_call(http, url, "tasks/get", {"taskId": task_id}, task_id)
            if "error" in got:
                raise CheckFailed(f"tasks/get on {name} (task from {creator}): {json.dumps(got['error'])[:300]}")
            status = got["result"].get("status")
            if status != "completed":
                raise CheckFailed(f"tasks/get on {name}: status {status!r}: {json.dumps(got)[:300]}")
            text = text_of(got["result"].get("result") or {})
            if "slow_compute(scale) done" not in text:
                raise CheckFailed(f"tasks/get on {name}: result {text!r}")
            read_on.append(name)
        # A running task cancelled through a replica that does not run it.
        created, runner = await raw_call(
            http, o.proxy, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 60, "label": "cancel"}}, "slow_compute"
        )
        victim = (created.get("result") or {}).get("taskId")
        if not victim or runner not in urls:
            raise CheckFailed(f"the second slow_compute did not start a task: {json.dumps(created)[:300]}")
        other = next(name for name in urls if name != runner)
        ack, _ = await raw_call(http, urls[other], "tasks/cancel", {"taskId": victim}, victim)
        if "error" in ack:
            raise CheckFailed(f"tasks/cancel on {other} (task runs on {runner}): {json.dumps(ack)[:300]}")
        got, _ = await raw_call(http, urls[runner], "tasks/get", {"taskId": victim}, victim)
        if (got.get("result") or {}).get("status") != "cancelled":
            raise CheckFailed(f"after tasks/cancel on {other}, {runner} says {json.dumps(got)[:300]}")
    return (f"task {task_id[:12]}... created on {creator}, read running on {running_on} and completed on {read_on}; "
            f"a task of {runner} cancelled through {other}")


async def counted_runs(http: httpx2.AsyncClient, url: str) -> int:
    """How many times the replica at `url` ran replica_counted_confirm to completion."""
    got, _ = await raw_call(http, url, "tools/call", {"name": "replica_status", "arguments": {}}, "replica_status")
    if "error" in got:
        raise CheckFailed(f"replica_status on {url}: {json.dumps(got['error'])[:300]}")
    status = json.loads(text_of(got["result"]))
    if "counted_runs" not in status:
        raise CheckFailed(f"replica_status on {url} does not count runs: {status}")
    return int(status["counted_runs"])


async def retry_once(o: argparse.Namespace) -> str:
    """Round 1 through haproxy, then the same retry straight to every replica: one answer, one run."""
    tool = "replica_counted_confirm"
    caps = {"elicitation": {}, "extensions": {TASKS_EXT: {}}}
    meta = {"io.modelcontextprotocol/clientCapabilities": caps}
    async with httpx2.AsyncClient(timeout=STEP_TIMEOUT) as http:
        before = {name: await counted_runs(http, url) for name, url, _ in o.replicas}
        first, asked_on = await raw_call(http, o.proxy, "tools/call", {"name": tool, "arguments": {}, "_meta": meta}, tool)
        result = first.get("result") or {}
        if result.get("resultType") != "input_required" or not result.get("requestState"):
            raise CheckFailed(f"{tool} through haproxy did not ask for input: {json.dumps(first)[:300]}")
        retry = {
            "name": tool,
            "arguments": {},
            "_meta": meta,
            "requestState": result["requestState"],
            "inputResponses": {"confirm": {"action": "accept", "content": {"ok": True}}},
        }
        answers: dict[str, Any] = {}
        for name, url, _ in o.replicas:
            # A copy that reaches a replica before the first one's outcome is recorded is
            # refused `in_progress`: the client sends it again shortly, as the error says.
            deadline = time.monotonic() + 10
            while True:
                got, _ = await raw_call(http, url, "tools/call", retry, tool)
                reason = ((got.get("error") or {}).get("data") or {}).get("reason")
                if reason != "in_progress" or time.monotonic() > deadline:
                    break
                await anyio.sleep(0.1)
            answers[name] = got.get("result") if "result" in got else {"error": got.get("error")}
        after = {name: await counted_runs(http, url) for name, url, _ in o.replicas}
    distinct = {json.dumps(a, sort_keys=True) for a in answers.values()}
    if len(distinct) != 1:
        raise CheckFailed(f"the copies were answered differently: {json.dumps(answers)[:600]}")
    answer = next(iter(answers.values()))
    if "error" in answer or "counted (accept)" not in text_of(answer):
        raise CheckFailed(f"the retry answered {json.dumps(answer)[:300]}")
    grew = sum(after.values()) - sum(before.values())
    if grew != 1:
        raise CheckFailed(f"the handler ran {grew} times over the replicas (runs before {before}, after {after})")
    ran_on = [name for name in after if after[name] != before[name]]
    return f"round 1 on {asked_on}, the retry sent to {list(answers)}: one answer ({text_of(answer)!r}), one run (on {ran_on[0]})"


async def kill_one(o: argparse.Namespace) -> str:
    victim_name, _victim_url, victim_pid = o.replicas[-1]
    workers, run_for, kill_at = 4, 4.0, 1.0
    tap = Tap()
    ok = 0
    failures: list[str] = []
    killed_at: list[float] = []

    async def worker(n: int) -> None:
        nonlocal ok
        async with sdk_session(o.proxy, tap) as s:
            await s.discover()
            stop = time.monotonic() + run_for
            i = 0
            while time.monotonic() < stop:
                text = f"w{n} #{i}"
                try:
                    with anyio.fail_after(STEP_TIMEOUT):
                        res = await s.call_tool("echo", {"text": text})
                    if text_of(res) == text:
                        ok += 1
                    else:
                        failures.append(f"{text}: answered {text_of(res)!r}")
                except Exception as e:  # noqa: BLE001
                    failures.append(f"{text}: {type(e).__name__}: {e}")
                i += 1

    async def killer() -> None:
        await anyio.sleep(kill_at)
        os.kill(victim_pid, signal.SIGKILL)
        killed_at.append(len(tap.seen))

    async with anyio.create_task_group() as tg:
        for n in range(workers):
            tg.start_soon(worker, n)
        tg.start_soon(killer)
    before = {r for _m, r, _s in tap.seen[: killed_at[0]]} if killed_at else set()
    after = [r for _m, r, _s in tap.seen[killed_at[0] :]] if killed_at else []
    # Requests already on their way when the kill landed may still be answered by it; anything
    # past the first 50 after the kill must come from the others.
    late = [r for r in after[50:] if r == victim_name]
    if failures:
        raise CheckFailed(f"{len(failures)} of {ok + len(failures)} calls failed, e.g. {failures[:3]}")
    if victim_name not in before:
        raise CheckFailed(f"{victim_name} served nothing before it was killed ({sorted(before, key=str)})")
    if late:
        raise CheckFailed(f"{victim_name} still answered {len(late)} requests long after it was killed")
    statuses = sorted({st for _m, _r, st in tap.seen})
    return (
        f"{ok} echo calls by {workers} clients, {victim_name} SIGKILLed after {kill_at}s, none failed; "
        f"served after the kill by {sorted({r for r in after if r}, key=str)}; HTTP statuses {statuses}"
    )


# ---- driver ---------------------------------------------------------------------------------------


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--proxy", required=True)
    p.add_argument("--replica", action="append", required=True, help="NAME=URL=PID")
    p.add_argument("--cluster", default="1")
    o = p.parse_args()
    o.replicas = []
    for spec in o.replica:
        name, url, pid = spec.split("=", 2)
        o.replicas.append((name, url, int(pid)))
    if len(o.replicas) < 3:
        p.error("need at least three --replica")
    return o


async def main() -> int:
    o = parse()
    scenarios = [
        ("1 paging: tools/list pages from different replicas", paging),
        ("2 listen: list_changed raised on B reaches a listener on A", listen_fanout),
        ("3 legacy: a 2025-11-25 session stays on one replica", legacy_session),
        ("4 tasks: a task created on one replica is read on the others", tasks_shared),
        ("6 retry: one input_required retry sent to every replica runs once", retry_once),
    ]
    scenarios.append(("5 kill: a replica SIGKILLed mid-run loses no request", kill_one))
    only = os.environ.get("SCALE_ONLY")  # e.g. "1,5": run just these (debugging)
    if only:
        scenarios = [(label, fn) for label, fn in scenarios if label.split()[0] in only.split(",")]
    shared = "share a Redis (--cluster)" if o.cluster == "1" else "run unshared (no --cluster): 1, 2, 3, 4 and 6 should FAIL"
    print(f"scale: {len(o.replicas)} replicas {shared}; through haproxy at {o.proxy}", flush=True)
    failed = 0
    for label, fn in scenarios:
        start = time.monotonic()
        try:
            try:
                with anyio.fail_after(60):
                    detail = await fn(o)
            except BaseExceptionGroup as group:
                # Raised inside a task group (the SDK's transport, a scenario's workers).
                inner: BaseException = group
                while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
                    inner = inner.exceptions[0]
                raise inner from None
            print(f"ok    {label} ({time.monotonic() - start:.1f}s): {detail}", flush=True)
        except CheckFailed as e:
            failed += 1
            print(f"FAIL  {label} ({time.monotonic() - start:.1f}s): {e}", flush=True)
        except BaseException as e:  # noqa: BLE001 - an SDK or transport error is a failure too
            if isinstance(e, KeyboardInterrupt):
                raise
            failed += 1
            while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
                e = e.exceptions[0]
            if os.environ.get("SCALE_DEBUG"):
                traceback.print_exception(e)
            if isinstance(e, BaseExceptionGroup):
                leaves = []
                stack = [e]
                while stack:
                    x = stack.pop()
                    if isinstance(x, BaseExceptionGroup):
                        stack.extend(x.exceptions)
                    else:
                        leaves.append(f"{type(x).__name__}: {x}")
                detail = f"{len(leaves)} errors: " + "; ".join(sorted(set(leaves)))
            else:
                detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            print(f"FAIL  {label} ({time.monotonic() - start:.1f}s): {detail[:600]}", flush=True)
    print(f"scale: {len(scenarios) - failed} ok, {failed} FAIL", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))

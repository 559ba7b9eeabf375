#!/usr/bin/env python3
"""Interop check: the official Python MCP SDK client against an example server in compact mode.

Usage:
    python compact.py [--http | --url URL] [--modern] [--admin] [--timeout SECONDS]
                      [SERVER_COMMAND [SERVER_ARGS...]]

e.g. python compact.py target/debug/examples/everything --mode compact
     python compact.py --http target/debug/examples/everything --mode compact

The server must publish compactly (`--mode compact`): tools/list is exactly
`search_tools`, `get_tool_details` and `call_tool`. The server is started and
connected exactly as client.py does it (stdio spawn through the SDK's
`stdio_client`; --http runs `SERVER_COMMAND [SERVER_ARGS...] --http 127.0.0.1:0`
and reads the `listening on http://HOST:PORT/mcp` stderr line; --url connects to
a running server), and everything goes through `ClientSession`, so the SDK parses
(and, for tools with an outputSchema, validates) every result as a real host would.

Checks: the three tools and their input schemas (no outputSchema); search_tools
ranks `echo` first for "echo" (the gated admin_echo is found only with --admin),
returns 5 results by default and honours `limit`, and refuses an out-of-range
limit with JSON-RPC -32602; get_tool_details("echo") returns echo's definition;
call_tool runs `echo` and `add` (plain text results, passed through as the
tools return them), and reports an unknown inner name as the `unavailable`
failure and bad inner arguments as the `invalid_arguments` failure. Discovery
results and failures must be `{"value": ...}` / `{"failure": {...}}` envelopes in
structuredContent with the same JSON as the one text block.

Prints one line per check, then `interop-python: N passed, M failed` (the line
tests/interop/run.sh looks for); exits 0 only if every check passed. --modern also
runs the checks over a 2026-07-28 session (server/discover; needs mcp>=2).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import types

# The stdio/HTTP plumbing, reporting and option parsing are client.py's own.
from client import (
    HANDSHAKE_VERSIONS,
    INVALID_PARAMS,
    PREFIX,
    SDK_VERSION,
    CheckFailed,
    ClientSession,
    Connect,
    Report,
    _McpError,
    describe_exc,
    drive,
    eras_for,
    parse_args,
    short,
    wire,
)

PUBLISHED = {"search_tools", "get_tool_details", "call_tool"}
# Each published tool's input properties and required ones (what compact.rs declares).
INPUTS = {
    "search_tools": ({"query": "string", "limit": "integer"}, ["query"]),
    "get_tool_details": ({"name": "string"}, ["name"]),
    "call_tool": ({"name": "string", "arguments": "object"}, ["name"]),
}
DEFAULT_RESULTS = 5
MAX_RESULTS = 20
ECHO_DESCRIPTION = "Echoes back the given text"
UNKNOWN_TOOL = "no_such_tool"

CHECKS = [
    "connect",
    "list_tools",
    "search_ranks_echo_first",
    "search_limit",
    "search_limit_out_of_range",
    "get_tool_details_echo",
    "call_tool_echo",
    "call_tool_add",
    "call_tool_unknown_name",
    "call_tool_invalid_arguments",
    "call_tool_after_failure",
]


def envelope(res: dict[str, Any], key: str, what: str) -> Any:
    """structuredContent[key] of a result whose one text block is the same JSON.

    `key` is "value" for a success (isError absent or false) and "failure" for an
    isError result; anything else in the envelope fails the check.
    """
    want_error = key == "failure"
    if bool(res.get("isError")) != want_error:
        raise CheckFailed(f"{what}: isError={res.get('isError')!r}, expected {want_error}: {short(res)}")
    sc = res.get("structuredContent")
    if not isinstance(sc, dict) or list(sc) != [key]:
        raise CheckFailed(f"{what}: structuredContent is not a {{{key!r}: ...}} envelope: {short(sc)}")
    content = res.get("content", [])
    if len(content) != 1 or content[0].get("type") != "text":
        raise CheckFailed(f"{what}: expected one text block mirroring the envelope, got {short(content)}")
    try:
        mirrored = json.loads(content[0].get("text", ""))
    except ValueError as e:
        raise CheckFailed(f"{what}: the text block is not JSON ({e}): {short(content[0])}") from e
    if mirrored != sc:
        raise CheckFailed(f"{what}: text block {short(mirrored)} differs from structuredContent {short(sc)}")
    return sc[key]


def failure(res: dict[str, Any], code: str, what: str) -> dict[str, Any]:
    f = envelope(res, "failure", what)
    if not isinstance(f, dict) or f.get("code") != code:
        raise CheckFailed(f"{what}: failure code {short(f)}, expected {code!r}")
    if not isinstance(f.get("message"), str) or not f["message"]:
        raise CheckFailed(f"{what}: failure without a message: {short(f)}")
    if f.get("retryable") is not False:
        raise CheckFailed(f"{what}: failure retryable={f.get('retryable')!r}, expected false")
    return f


def plain_text(res: dict[str, Any], what: str) -> str:
    """The one text block of a successful result that carries no structuredContent."""
    if res.get("isError"):
        raise CheckFailed(f"{what}: unexpected isError=true result: {short(res)}")
    if "structuredContent" in res:
        raise CheckFailed(f"{what}: a text-only tool's result gained structuredContent: {short(res)}")
    content = res.get("content", [])
    if len(content) != 1 or content[0].get("type") != "text":
        raise CheckFailed(f"{what}: expected exactly one text block, got {short(content)}")
    return content[0].get("text", "")


async def run_checks(session: ClientSession, era: str, report: Report, timeout: float, admin: bool) -> None:
    tag = f"{era}:"
    try:
        with anyio.fail_after(timeout):
            if era == "legacy":
                init = wire(await session.initialize())
                negotiated = init.get("protocolVersion")
                if negotiated not in HANDSHAKE_VERSIONS:
                    raise CheckFailed(f"initialize returned unexpected protocolVersion {negotiated!r}")
                how = "initialize"
            else:
                await session.discover()
                negotiated = getattr(session, "protocol_version", None)
                how = "server/discover"
        report.ok(f"{tag}connect", f"{how} ok, negotiated protocol version {negotiated}")
    except Exception as e:  # noqa: BLE001 - report and abort this session
        report.fail(f"{tag}connect", describe_exc(e))
        for name in CHECKS[1:]:
            report.fail(f"{tag}{name}", "not run (connect failed)")
        return

    async def step(name: str, body) -> None:  # type: ignore[no-untyped-def]
        try:
            with anyio.fail_after(timeout):
                detail = await body()
            report.ok(f"{tag}{name}", detail)
        except CheckFailed as e:
            report.fail(f"{tag}{name}", str(e))
        except TimeoutError:
            report.fail(f"{tag}{name}", f"timed out after {timeout}s")
        except _McpError as e:
            report.fail(f"{tag}{name}", f"JSON-RPC error {e.error.code}: {e.error.message}")
        except Exception as e:  # noqa: BLE001
            report.fail(f"{tag}{name}", describe_exc(e))

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return wire(await session.call_tool(name, arguments))

    async def search(arguments: dict[str, Any], what: str) -> list[str]:
        found = envelope(await call("search_tools", arguments), "value", what)
        tools = found.get("tools") if isinstance(found, dict) else None
        if not isinstance(tools, list) or not all(isinstance(t, dict) and "name" in t for t in tools):
            raise CheckFailed(f"{what}: value is not {{'tools': [{{'name': ...}}, ...]}}: {short(found)}")
        return [t["name"] for t in tools]

    async def list_tools() -> str:
        tools: dict[str, dict[str, Any]] = {}
        cursor = None
        for _ in range(100):
            params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
            page = wire(await session.list_tools(params=params))
            for t in page.get("tools", []):
                if t["name"] in tools:
                    raise CheckFailed(f"tool {t['name']!r} listed twice")
                tools[t["name"]] = t
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        else:
            raise CheckFailed("tools/list pagination did not terminate after 100 pages")
        if set(tools) != PUBLISHED:
            raise CheckFailed(f"tools/list is {sorted(tools)}, expected exactly {sorted(PUBLISHED)}")
        for name, (props, required) in INPUTS.items():
            t = tools[name]
            if "outputSchema" in t:
                raise CheckFailed(f"{name} has an outputSchema: {short(t['outputSchema'])}")
            schema = t.get("inputSchema") or {}
            got = {k: (v or {}).get("type") for k, v in (schema.get("properties") or {}).items()}
            if schema.get("type") != "object" or got != props or schema.get("required") != required:
                raise CheckFailed(f"{name}.inputSchema {short(schema)}: expected properties {props}, required {required}")
            if schema.get("additionalProperties") is not False:
                raise CheckFailed(f"{name}.inputSchema does not forbid additional properties: {short(schema)}")
        limit = tools["search_tools"]["inputSchema"]["properties"]["limit"]
        if (limit.get("minimum"), limit.get("maximum"), limit.get("default")) != (1, MAX_RESULTS, DEFAULT_RESULTS):
            raise CheckFailed(f"search_tools limit schema {short(limit)}: expected 1..{MAX_RESULTS}, default {DEFAULT_RESULTS}")
        return f"exactly {', '.join(sorted(tools))}, input schemas as declared, no outputSchema"

    async def search_ranks_echo_first() -> str:
        names = await search({"query": "echo"}, "search_tools(echo)")
        if not names or names[0] != "echo":
            raise CheckFailed(f"search_tools(echo) ranked {names}, expected 'echo' first")
        if admin != ("admin_echo" in names):
            raise CheckFailed(f"search_tools(echo) gave {names}: the gated admin_echo must be found "
                              f"{'' if admin else 'only '}by an admin caller")
        return f"{names}"

    async def search_limit() -> str:
        default = await search({"query": "test"}, "search_tools(test)")
        if len(default) != DEFAULT_RESULTS:
            raise CheckFailed(f"search_tools(test) without limit gave {len(default)} results, expected {DEFAULT_RESULTS}: {default}")
        two = await search({"query": "test", "limit": 2}, "search_tools(test, limit 2)")
        if two != default[:2]:
            raise CheckFailed(f"limit 2 gave {two}, expected the first two of {default}")
        most = await search({"query": "test", "limit": MAX_RESULTS}, f"search_tools(test, limit {MAX_RESULTS})")
        if not DEFAULT_RESULTS < len(most) <= MAX_RESULTS or most[:DEFAULT_RESULTS] != default:
            raise CheckFailed(f"limit {MAX_RESULTS} gave {most}, expected more than {DEFAULT_RESULTS} starting with {default}")
        return f"default {len(default)}, limit 2 -> {two}, limit {MAX_RESULTS} -> {len(most)} results"

    async def search_limit_out_of_range() -> str:
        try:
            res = await call("search_tools", {"query": "test", "limit": MAX_RESULTS + 1})
        except _McpError as e:
            if e.error.code != INVALID_PARAMS:
                raise CheckFailed(f"expected JSON-RPC error {INVALID_PARAMS}, got {e.error.code}: {e.error.message}")
            return f"JSON-RPC error -32602 ({e.error.message!r})"
        raise CheckFailed(f"limit {MAX_RESULTS + 1} was accepted: {short(res)}")

    async def get_tool_details_echo() -> str:
        d = envelope(await call("get_tool_details", {"name": "echo"}), "value", "get_tool_details(echo)")
        if not isinstance(d, dict) or d.get("name") != "echo" or d.get("description") != ECHO_DESCRIPTION:
            raise CheckFailed(f"not echo's definition: {short(d)}")
        schema = d.get("inputSchema") or {}
        text = (schema.get("properties") or {}).get("text") or {}
        if schema.get("type") != "object" or text.get("type") != "string" or schema.get("required") != ["text"]:
            raise CheckFailed(f"echo's inputSchema {short(schema)} lacks the required string 'text'")
        return f"name, description and inputSchema of echo ({short(d, 120)})"

    async def call_tool_echo() -> str:
        got = plain_text(await call("call_tool", {"name": "echo", "arguments": {"text": "hello compact"}}), "echo")
        if got != "hello compact":
            raise CheckFailed(f"echo returned {got!r}, expected 'hello compact'")
        return "text 'hello compact' round-tripped"

    async def call_tool_add() -> str:
        got = plain_text(await call("call_tool", {"name": "add", "arguments": {"a": 2, "b": 3.5}}), "add")
        if got != "5.5":
            raise CheckFailed(f"add(2, 3.5) returned {got!r}, expected '5.5'")
        return "text '5.5', no structuredContent (passed through as add returns it)"

    async def call_tool_unknown_name() -> str:
        f = failure(await call("call_tool", {"name": UNKNOWN_TOOL, "arguments": {}}), "unavailable", UNKNOWN_TOOL)
        return f"isError, failure {short(f)}"

    async def call_tool_invalid_arguments() -> str:
        res = await call("call_tool", {"name": "echo", "arguments": {"text": 5}})
        f = failure(res, "invalid_arguments", "echo with text=5")
        if "echo" not in f["message"] or "text" not in f["message"]:
            raise CheckFailed(f"the message does not name the tool and the field: {f['message']!r}")
        return f"isError, failure {short(f)}"

    async def call_tool_after_failure() -> str:
        got = plain_text(await call("call_tool", {"name": "echo", "arguments": {"text": "still alive"}}), "echo")
        if got != "still alive":
            raise CheckFailed(f"echo returned {got!r}, expected 'still alive'")
        return "session still usable after the failures"

    for name, body in [
        ("list_tools", list_tools),
        ("search_ranks_echo_first", search_ranks_echo_first),
        ("search_limit", search_limit),
        ("search_limit_out_of_range", search_limit_out_of_range),
        ("get_tool_details_echo", get_tool_details_echo),
        ("call_tool_echo", call_tool_echo),
        ("call_tool_add", call_tool_add),
        ("call_tool_unknown_name", call_tool_unknown_name),
        ("call_tool_invalid_arguments", call_tool_invalid_arguments),
        ("call_tool_after_failure", call_tool_after_failure),
    ]:
        await step(name, body)


async def run_session(connect: Connect, era: str, report: Report, timeout: float, admin: bool) -> None:
    try:
        async with connect() as (read, write):
            async with ClientSession(read, write) as session:
                await run_checks(session, era, report, timeout, admin)
    except Exception as e:  # noqa: BLE001 - spawn failure or transport teardown error
        report.fail(f"{era}:transport", describe_exc(e))
        for name in CHECKS:
            if f"{era}:{name}" not in report.seen:
                report.fail(f"{era}:{name}", "not run (transport failed)")


def main() -> int:
    o = parse_args(sys.argv[1:])
    transport = "stdio" if o.url is None and not o.http else "streamable HTTP"
    server = o.url if o.url is not None else " ".join(o.cmd)
    print(f"[{PREFIX}] mcp (Python SDK) {SDK_VERSION}, {transport}, compact mode, server: {server}", flush=True)
    report = Report()
    return drive(
        o,
        report,
        eras_for(o, report),
        lambda _era: CHECKS,
        lambda connect, era: run_session(connect, era, report, o.timeout, o.admin),
    )


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Interop check: the official Python MCP SDK client against one of our stdio servers.

Usage:
    python client.py [--modern] [--timeout SECONDS] SERVER_COMMAND [SERVER_ARGS...]

e.g. python client.py target/release/examples/everything

The server is spawned with the SDK's `stdio_client` and driven through
`ClientSession`, i.e. exactly the code path a real Python MCP host uses.
One line is printed per check, then a summary line of the form
`interop-python: N passed, M failed`. The exit status is 0 only if every
check passed.

Options (must come before the server command):
    --modern          after the legacy (initialize) session, also run the same
                      checks over a second session negotiated with
                      `server/discover` (protocol 2026-07-28). Needs mcp>=2.
    --timeout SECS    per-step timeout (default 30; env INTEROP_TIMEOUT).

Written against mcp 2.x (pinned in requirements.txt) but kept compatible with
mcp 1.x: results are compared in their wire (camelCase JSON) form.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio

try:  # mcp >= 2
    from mcp.shared.exceptions import MCPError as _McpError
except ImportError:  # mcp 1.x
    from mcp.shared.exceptions import McpError as _McpError  # type: ignore[no-redef]

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types

try:
    from importlib.metadata import version as _pkg_version

    SDK_VERSION = _pkg_version("mcp")
except Exception:  # pragma: no cover - metadata missing
    SDK_VERSION = "unknown"

PREFIX = "interop-python"
INVALID_PARAMS = -32602
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# First protocol version on which argument-validation failures are tool
# execution errors (isError: true, SEP-1303) instead of JSON-RPC -32602.
ISERROR_VALIDATION_VERSIONS = ("2025-11-25", "2026-07-28")

# Fixed check list per session, so an early abort still reports a stable total.
CHECKS = [
    "connect",
    "list_tools",
    "echo",
    "add",
    "echo_invalid_args",
    "echo_after_error",
    "test_simple_text",
]


class CheckFailed(Exception):
    pass


class Report:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def ok(self, label: str, detail: str = "") -> None:
        self.passed += 1
        print(f"[{PREFIX}] PASS {label}" + (f": {detail}" if detail else ""), flush=True)

    def fail(self, label: str, detail: str) -> None:
        self.failed += 1
        print(f"[{PREFIX}] FAIL {label}: {detail}", flush=True)

    def note(self, text: str) -> None:
        print(f"[{PREFIX}] NOTE {text}", flush=True)


def wire(model: Any) -> dict[str, Any]:
    """The JSON-RPC wire form (camelCase keys, no unset/None fields) of an SDK model."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def short(obj: Any, limit: int = 300) -> str:
    s = repr(obj)
    return s if len(s) <= limit else s[:limit] + "...(truncated)"


def texts(result: dict[str, Any]) -> list[str]:
    return [b.get("text", "") for b in result.get("content", []) if b.get("type") == "text"]


def expect_single_text(result: dict[str, Any], what: str) -> str:
    if result.get("isError"):
        raise CheckFailed(f"{what}: unexpected isError=true result: {short(result)}")
    content = result.get("content")
    if not isinstance(content, list) or len(content) != 1:
        raise CheckFailed(f"{what}: expected exactly one content block, got {short(content)}")
    block = content[0]
    if block.get("type") != "text":
        raise CheckFailed(f"{what}: expected a text block, got {short(block)}")
    return block.get("text", "")


async def run_checks(session: ClientSession, era: str, report: Report, timeout: float) -> None:
    """Run CHECKS in order on a freshly created (not yet negotiated) session."""
    tag = f"{era}:"
    pending = list(CHECKS)

    def done(name: str) -> None:
        pending.remove(name)

    negotiated = None
    try:
        # --- connect -------------------------------------------------------
        with anyio.fail_after(timeout):
            if era == "legacy":
                init = wire(await session.initialize())
                negotiated = init.get("protocolVersion")
                server_info = init.get("serverInfo", {})
                caps = init.get("capabilities", {})
                how = "initialize"
            else:
                disc = wire(await session.discover())
                negotiated = getattr(session, "protocol_version", None)
                server_info = (disc.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo", {})
                caps = disc.get("capabilities", {})
                how = f"server/discover (supportedVersions={disc.get('supportedVersions')})"
        done("connect")
        if era == "legacy" and negotiated not in HANDSHAKE_VERSIONS:
            raise CheckFailed(f"initialize returned unexpected protocolVersion {negotiated!r}")
        if "tools" not in caps:
            raise CheckFailed(f"server capabilities lack 'tools': {short(caps)}")
        report.ok(
            f"{tag}connect",
            f"{how} ok, negotiated protocol version {negotiated}, "
            f"server {server_info.get('name')} {server_info.get('version')}",
        )
        print(f"[{PREFIX}] negotiated protocolVersion ({era}): {negotiated}", flush=True)
    except Exception as e:  # noqa: BLE001 - report and abort this session
        if "connect" in pending:
            done("connect")
        report.fail(f"{tag}connect", f"{type(e).__name__}: {e}")
        for name in pending:
            report.fail(f"{tag}{name}", "not run (connect failed)")
        return

    async def step(name: str, body) -> None:  # type: ignore[no-untyped-def]
        done(name)
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
            report.fail(f"{tag}{name}", f"{type(e).__name__}: {e}")

    # --- list_tools ---------------------------------------------------------
    async def list_tools() -> str:
        tools: dict[str, dict[str, Any]] = {}
        cursor = None
        for _ in range(100):
            if cursor is None:
                page = wire(await session.list_tools())
            else:
                page = wire(await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor)))
            for t in page.get("tools", []):
                tools[t["name"]] = t
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        else:
            raise CheckFailed("tools/list pagination did not terminate after 100 pages")
        for name in ("echo", "add"):
            if name not in tools:
                raise CheckFailed(f"tool {name!r} missing; got {sorted(tools)}")
        schema = tools["echo"].get("inputSchema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise CheckFailed(f"echo.inputSchema missing or not type=object: {short(schema)}")
        return f"{len(tools)} tools: {', '.join(sorted(tools))}"

    # --- echo ---------------------------------------------------------------
    async def echo() -> str:
        res = wire(await session.call_tool("echo", {"text": "hello interop"}))
        got = expect_single_text(res, "echo")
        if got != "hello interop":
            raise CheckFailed(f"echo returned {got!r}, expected 'hello interop'")
        return "text 'hello interop' round-tripped"

    # --- add ----------------------------------------------------------------
    async def add() -> str:
        res = wire(await session.call_tool("add", {"a": 2, "b": 3.5}))
        if res.get("isError"):
            raise CheckFailed(f"add: unexpected isError=true result: {short(res)}")
        t = texts(res)
        if not t or t[0] != "5.5":
            raise CheckFailed(f"add(2, 3.5) returned text {t!r}, expected '5.5' (full result {short(res)})")
        extra = f", structuredContent={res['structuredContent']}" if "structuredContent" in res else ""
        return f"text '5.5'{extra}"

    # --- echo with invalid arguments -----------------------------------------
    async def echo_invalid() -> str:
        expected = "isError result" if negotiated in ISERROR_VALIDATION_VERSIONS else "JSON-RPC -32602"
        try:
            res = wire(await session.call_tool("echo", {"text": 5}))
        except _McpError as e:
            if e.error.code != INVALID_PARAMS:
                raise CheckFailed(f"expected JSON-RPC error {INVALID_PARAMS}, got {e.error.code}: {e.error.message}")
            form = "JSON-RPC -32602"
            detail = f"JSON-RPC error -32602 ({e.error.message!r})"
        else:
            if not res.get("isError"):
                raise CheckFailed(f"echo with text=5 succeeded instead of failing validation: {short(res)}")
            msg = " ".join(texts(res)).strip()
            if not msg:
                raise CheckFailed(f"isError result carries no explanatory text: {short(res)}")
            lowered = msg.lower()
            if not any(k in lowered for k in ("text", "string", "type", "invalid", "valid")):
                raise CheckFailed(f"isError text does not mention the problem: {msg!r}")
            form = "isError result"
            detail = f"isError=true result ({msg!r})"
        if form != expected:
            report.note(f"{era}: validation failure came back as {form} but {expected} is what "
                        f"protocol {negotiated} calls for")
        print(f"[{PREFIX}] validation-error form ({era}, protocol {negotiated}): {form}", flush=True)
        return f"{detail} [protocol {negotiated}]"

    # --- session survives the error ------------------------------------------
    async def echo_again() -> str:
        res = wire(await session.call_tool("echo", {"text": "still alive"}))
        got = expect_single_text(res, "echo after error")
        if got != "still alive":
            raise CheckFailed(f"echo returned {got!r}, expected 'still alive'")
        return "session still usable after the validation failure"

    # --- conformance fixture ---------------------------------------------------
    async def simple_text() -> str:
        res = wire(await session.call_tool("test_simple_text"))
        if res.get("isError"):
            raise CheckFailed(f"unexpected isError=true result: {short(res)}")
        t = [x for x in texts(res) if x.strip()]
        if not t:
            raise CheckFailed(f"no non-empty text block in {short(res)}")
        return f"text {short(t[0], 80)}"

    await step("list_tools", list_tools)
    await step("echo", echo)
    await step("add", add)
    await step("echo_invalid_args", echo_invalid)
    await step("echo_after_error", echo_again)
    await step("test_simple_text", simple_text)


async def run_session(params: StdioServerParameters, era: str, report: Report, timeout: float) -> None:
    started = False
    try:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                started = True
                await run_checks(session, era, report, timeout)
    except Exception as e:  # noqa: BLE001 - spawn failure or transport teardown error
        # Failures inside run_checks are already reported; this is the spawn
        # or the transport itself failing.
        if started:
            report.fail(f"{era}:transport", f"{type(e).__name__}: {e}")
        else:
            report.fail(f"{era}:connect", f"could not start the server: {type(e).__name__}: {e}")
            for name in CHECKS[1:]:
                report.fail(f"{era}:{name}", "not run (connect failed)")


def parse_args(argv: list[str]) -> tuple[bool, float, list[str]]:
    modern = False
    timeout = float(os.environ.get("INTEROP_TIMEOUT", "30"))
    i = 0
    while i < len(argv) and argv[i].startswith("--"):
        if argv[i] == "--modern":
            modern = True
        elif argv[i] == "--timeout" and i + 1 < len(argv):
            i += 1
            timeout = float(argv[i])
        elif argv[i] == "--":
            i += 1
            break
        else:
            sys.exit(f"{PREFIX}: unknown option {argv[i]!r}\n{__doc__}")
        i += 1
    cmd = argv[i:]
    if not cmd:
        sys.exit(f"{PREFIX}: missing server command\n{__doc__}")
    return modern, timeout, cmd


def main() -> int:
    modern, timeout, cmd = parse_args(sys.argv[1:])
    print(f"[{PREFIX}] mcp (Python SDK) {SDK_VERSION}, server: {' '.join(cmd)}", flush=True)
    # The SDK hands the child only a small allow-list of environment variables
    # (HOME, PATH, ...); pass ours through so RUST_LOG / RUST_BACKTRACE reach the server.
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ))
    report = Report()

    async def all_sessions() -> None:
        await run_session(params, "legacy", report, timeout)
        if modern:
            if not hasattr(ClientSession, "discover"):
                report.fail("modern:connect", f"mcp {SDK_VERSION} has no ClientSession.discover (needs mcp>=2)")
            else:
                await run_session(params, "modern", report, timeout)

    anyio.run(all_sessions)
    print(f"{PREFIX}: {report.passed} passed, {report.failed} failed", flush=True)
    return 0 if report.failed == 0 and report.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())

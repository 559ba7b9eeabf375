#!/usr/bin/env python3
"""Interop check: the official Python MCP SDK client against one of our example servers.

Usage:
    python client.py [--http | --url URL] [--modern] [--admin] [--timeout SECONDS]
                     [--notify-timeout SECONDS] [SERVER_COMMAND [SERVER_ARGS...]]

e.g. python client.py target/release/examples/everything
     python client.py --admin target/release/examples/everything --role admin
     python client.py --http target/release/examples/everything
     python client.py --url http://127.0.0.1:3000/mcp

By default the server is spawned with the SDK's `stdio_client`. With --http the
client starts `SERVER_COMMAND [SERVER_ARGS...] --http 127.0.0.1:0` itself, reads
the one line `listening on http://HOST:PORT/mcp` the server prints to stderr,
connects with the SDK's Streamable HTTP client transport and kills the server at
the end (that process only: a wrapper script must `exec` the server); with --url
it connects to a server that is already running. Either way the session is
driven through `ClientSession`, i.e. exactly the code path a real Python MCP host
uses. One line is printed per check, then a summary line of the form
`interop-python: N passed, M failed`. The exit status is 0 only if every check
passed.

Options (must come before the server command):
    --http            Streamable HTTP: start the server on an ephemeral port (see above).
    --url URL         Streamable HTTP to an already running server (no server command).
    --modern          after the legacy (initialize) session, also run the same
                      checks over a second session negotiated with
                      `server/discover` (protocol 2026-07-28). Needs mcp>=2.
    --admin           the server's caller has the admin role (`--role admin`, stdio
                      only): expect the gated admin_echo tool and
                      test://admin-secret resource to be visible and working
                      (without it: expect them hidden).
    --timeout SECS    per-step timeout (default 30; env INTEROP_TIMEOUT).
    --notify-timeout SECS
                      how long to wait for an expected server notification
                      (default 5; env INTEROP_NOTIFY_TIMEOUT).

Notification checks (resource subscription, tools/prompts list_changed,
logging) use the SDK's hooks (`message_handler`, `logging_callback`) and wait
for the notification with a bounded timeout; they are legacy-era only (the
2026-07-28 era replaces resources/subscribe and logging/setLevel). The progress
check passes a `progress_callback` to `call_tool`.

Interaction checks: the session is created with a `sampling_callback` and an
`elicitation_callback`, so the SDK declares both capabilities. `test_sampling` and
`test_elicitation` must make the server ask the client (sampling/createMessage,
elicitation/create on the legacy era; an input_required result answered through
`ClientSession.dispatch_input_request` and a retry on 2026-07-28), the callback
must see what the tool was given, and the tool result must carry the answer.

Written against mcp 2.x (pinned in requirements.txt) but kept compatible with
mcp 1.x: results are compared in their wire (camelCase JSON) form.
"""

from __future__ import annotations

import base64
import builtins
import os
import re
import subprocess
import sys
import warnings
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

import anyio

try:  # mcp >= 2
    from mcp.shared.exceptions import MCPError as _McpError
except ImportError:  # mcp 1.x
    from mcp.shared.exceptions import McpError as _McpError  # type: ignore[no-redef]

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types

try:  # mcp >= 2 (yields read, write)
    from mcp.client.streamable_http import streamable_http_client as _http_client
except ImportError:  # mcp 1.x (yields read, write, get_session_id)
    from mcp.client.streamable_http import streamablehttp_client as _http_client  # type: ignore[no-redef]

try:  # mcp >= 2 flags the 2025-era subscribe / setLevel calls as deprecated
    from mcp.shared.exceptions import MCPDeprecationWarning as _DeprecationCategory
except ImportError:  # mcp 1.x
    _DeprecationCategory = DeprecationWarning  # type: ignore[misc,assignment]

try:
    from importlib.metadata import version as _pkg_version

    SDK_VERSION = _pkg_version("mcp")
except Exception:  # pragma: no cover - metadata missing
    SDK_VERSION = "unknown"

PREFIX = "interop-python"
INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002
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
    "list_resources",
    "read_static_text",
    "read_static_binary",
    "resource_template",
    "list_prompts",
    "get_prompt_with_arguments",
    "get_prompt_missing_argument",
    "complete_prompt_argument",
    "gated_items",
    "progress_notifications",
    "sampling",
    "elicitation",
    "resource_subscribe_updated",
    "tool_list_changed",
    "prompt_list_changed",
    "logging_notifications",
]
# Checks that need the 2025-era notification plumbing (resources/subscribe,
# logging/setLevel, list_changed pushed on the session); skipped on 2026-07-28.
LEGACY_ONLY = {"resource_subscribe_updated", "tool_list_changed", "prompt_list_changed", "logging_notifications"}

STATIC_TEXT = "This is the content of the static text resource."
ADMIN_SECRET = "test://admin-secret"
WATCHED = "test://watched-resource"
TEMPLATE = "test://template/{id}/data"
PROMPTS = (
    "test_simple_prompt",
    "test_prompt_with_arguments",
    "test_prompt_with_embedded_resource",
    "test_prompt_with_image",
)
LOG_STEPS = ["Tool execution started", "Tool processing data", "Tool execution completed"]
# What the interaction checks send and what the client's callbacks answer.
SAMPLE_PROMPT = "interop: name a colour"
SAMPLE_ANSWER = "interop-sampled: teal"
ELICIT_MESSAGE = "interop: who are you?"
ELICIT_ANSWER = {"username": "interop-user", "email": "interop@example.com"}


def checks_for(era: str) -> list[str]:
    return [c for c in CHECKS if era == "legacy" or c not in LEGACY_ONLY]


class CheckFailed(Exception):
    pass


class Report:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0
        self.seen: set[str] = set()

    def ok(self, label: str, detail: str = "") -> None:
        self.passed += 1
        self.seen.add(label)
        print(f"[{PREFIX}] PASS {label}" + (f": {detail}" if detail else ""), flush=True)

    def fail(self, label: str, detail: str) -> None:
        self.failed += 1
        self.seen.add(label)
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


class Inbox:
    """Server notifications delivered through the SDK's hooks, with bounded waits.

    `message_handler` sees every surfaced server notification (mcp 1.x also
    hands it request responders, which are ignored); `logging_callback` sees
    notifications/message params, `progress_callback` one call's progress; the
    sampling and elicitation callbacks answer the server's requests and record
    their params. Must be created inside the event loop.
    """

    def __init__(self) -> None:
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        self.logs: list[dict[str, Any]] = []
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.sampled: list[dict[str, Any]] = []
        self.elicited: list[dict[str, Any]] = []
        self.stream_errors: list[Exception] = []
        self._arrived = anyio.Event()

    def _wake(self) -> None:
        ev, self._arrived = self._arrived, anyio.Event()
        ev.set()

    async def message_handler(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.stream_errors.append(message)
            self._wake()
            return
        n = getattr(message, "root", message)  # mcp 1.x wraps ServerNotification in a RootModel
        method = getattr(n, "method", None)
        if not isinstance(method, str):
            return
        params = getattr(n, "params", None)
        self.notifications.append((method, wire(params) if params is not None else {}))
        self._wake()

    async def logging_callback(self, params: Any) -> None:
        self.logs.append(wire(params))
        self._wake()

    async def progress_callback(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))
        self._wake()

    async def sampling_callback(self, context: Any, params: Any) -> Any:
        """Answers sampling/createMessage with SAMPLE_ANSWER, recording what was asked."""
        self.sampled.append(wire(params))
        self._wake()
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLE_ANSWER),
            model="interop-test-model",
            stop_reason="endTurn",
        )

    async def elicitation_callback(self, context: Any, params: Any) -> Any:
        """Accepts elicitation/create with ELICIT_ANSWER, recording what was asked."""
        self.elicited.append(wire(params))
        self._wake()
        return types.ElicitResult(action="accept", content=dict(ELICIT_ANSWER))

    def count(self, method: str, pred: Callable[[dict[str, Any]], bool] = lambda _p: True) -> int:
        return sum(1 for m, p in self.notifications if m == method and pred(p))

    async def wait_for(self, cond: Callable[[], bool], timeout: float) -> bool:
        """Wait until cond() holds, at most `timeout` seconds; returns whether it does."""
        with anyio.move_on_after(timeout):
            while not cond():
                await self._arrived.wait()
        return cond()


def quiet_deprecated(call: Any) -> Any:
    """Call a 2025-era SDK method that mcp 2.x marks deprecated, without the warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _DeprecationCategory)
        return call()


async def paginate(fetch: Callable[[str | None], Any], key: str, what: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):
        page = wire(await fetch(cursor))
        items.extend(page.get(key, []))
        cursor = page.get("nextCursor")
        if cursor is None:
            return items
    raise CheckFailed(f"{what} pagination did not terminate after 100 pages")


def page_params(cursor: str | None) -> Any:
    return None if cursor is None else types.PaginatedRequestParams(cursor=cursor)


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


async def run_checks(
    session: ClientSession,
    era: str,
    report: Report,
    timeout: float,
    inbox: Inbox,
    admin: bool,
    notify_timeout: float,
) -> None:
    """Run checks_for(era) in order on a freshly created (not yet negotiated) session."""
    tag = f"{era}:"
    pending = checks_for(era)

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

    # --- resources ------------------------------------------------------------
    async def list_resources() -> str:
        res = await paginate(lambda c: session.list_resources(params=page_params(c)), "resources", "resources/list")
        uris = sorted(r.get("uri", "") for r in res)
        if "test://static-text" not in uris:
            raise CheckFailed(f"test://static-text missing; got {uris}")
        if admin and ADMIN_SECRET not in uris:
            raise CheckFailed(f"{ADMIN_SECRET} missing although the server runs with --role admin; got {uris}")
        if not admin and ADMIN_SECRET in uris:
            raise CheckFailed(f"gated {ADMIN_SECRET} listed to an anonymous caller; got {uris}")
        static = next(r for r in res if r.get("uri") == "test://static-text")
        if static.get("mimeType") != "text/plain":
            raise CheckFailed(f"test://static-text mimeType {static.get('mimeType')!r}, expected 'text/plain'")
        return f"{len(uris)} resources: {', '.join(uris)}"

    async def read_static_text() -> str:
        res = wire(await session.read_resource("test://static-text"))
        contents = res.get("contents", [])
        if len(contents) != 1:
            raise CheckFailed(f"expected one contents entry, got {short(contents)}")
        c = contents[0]
        if c.get("text") != STATIC_TEXT:
            raise CheckFailed(f"text {c.get('text')!r}, expected {STATIC_TEXT!r}")
        if c.get("uri") != "test://static-text" or c.get("mimeType") != "text/plain":
            raise CheckFailed(f"uri/mimeType wrong: {short(c)}")
        return f"text {STATIC_TEXT!r}"

    async def read_static_binary() -> str:
        res = wire(await session.read_resource("test://static-binary"))
        contents = res.get("contents", [])
        if len(contents) != 1 or not isinstance(contents[0].get("blob"), str):
            raise CheckFailed(f"expected one blob entry, got {short(contents)}")
        c = contents[0]
        raw = base64.b64decode(c["blob"], validate=True)
        if not raw.startswith(b"\x89PNG\r\n\x1a\n"):
            raise CheckFailed(f"blob is not a PNG: {raw[:16]!r}")
        if c.get("mimeType") != "image/png":
            raise CheckFailed(f"mimeType {c.get('mimeType')!r}, expected 'image/png'")
        return f"{len(raw)}-byte PNG blob, mimeType image/png"

    async def resource_template() -> str:
        tpls = await paginate(
            lambda c: session.list_resource_templates(params=page_params(c)), "resourceTemplates", "templates/list"
        )
        got = sorted(t.get("uriTemplate", "") for t in tpls)
        if TEMPLATE not in got:
            raise CheckFailed(f"template {TEMPLATE!r} missing; got {got}")
        res = wire(await session.read_resource("test://template/123/data"))
        contents = res.get("contents", [])
        body = " ".join(c.get("text", "") for c in contents)
        if "123" not in body:
            raise CheckFailed(f"reading test://template/123/data gave no '123': {short(contents)}")
        return f"templates {got}; read test://template/123/data -> {short(body, 100)}"

    # --- prompts --------------------------------------------------------------
    async def list_prompts() -> str:
        prompts = await paginate(lambda c: session.list_prompts(params=page_params(c)), "prompts", "prompts/list")
        by_name = {p["name"]: p for p in prompts}
        missing = [n for n in PROMPTS if n not in by_name]
        if missing:
            raise CheckFailed(f"prompts {missing} missing; got {sorted(by_name)}")
        args = {a["name"]: a.get("required", False) for a in by_name["test_prompt_with_arguments"].get("arguments", [])}
        if args != {"arg1": True, "arg2": True}:
            raise CheckFailed(f"test_prompt_with_arguments arguments {args}, expected arg1/arg2 required")
        return f"{len(by_name)} prompts: {', '.join(sorted(by_name))}"

    async def get_prompt_with_arguments() -> str:
        res = wire(await session.get_prompt("test_prompt_with_arguments", {"arg1": "alpha-1", "arg2": "beta-2"}))
        msgs = res.get("messages", [])
        text = " ".join(
            m.get("content", {}).get("text", "") for m in msgs if m.get("content", {}).get("type") == "text"
        )
        if "alpha-1" not in text or "beta-2" not in text:
            raise CheckFailed(f"prompt text lacks the argument values: {short(msgs)}")
        return f"text {text!r}"

    async def get_prompt_missing_argument() -> str:
        try:
            res = wire(await session.get_prompt("test_prompt_with_arguments", {"arg1": "only-one"}))
        except _McpError as e:
            if e.error.code != INVALID_PARAMS:
                raise CheckFailed(f"expected JSON-RPC error {INVALID_PARAMS}, got {e.error.code}: {e.error.message}")
            return f"JSON-RPC error -32602 ({e.error.message!r})"
        raise CheckFailed(f"prompts/get without required arg2 succeeded: {short(res)}")

    async def complete_prompt_argument() -> str:
        ref = types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments")
        res = wire(await session.complete(ref, {"name": "arg1", "value": "te"}))
        values = res.get("completion", {}).get("values", [])
        if "testValue1" not in values:
            raise CheckFailed(f"completion values {values} lack 'testValue1'")
        bad = [v for v in values if not v.startswith("te")]
        if bad:
            raise CheckFailed(f"completion values {bad} do not start with 'te'")
        return f"values {values}"

    # --- gated items ------------------------------------------------------------
    async def gated_items() -> str:
        tools = await paginate(lambda c: session.list_tools(params=page_params(c)), "tools", "tools/list")
        visible = "admin_echo" in {t["name"] for t in tools}
        if admin:
            if not visible:
                raise CheckFailed("admin_echo not listed although the server runs with --role admin")
            got = expect_single_text(wire(await session.call_tool("admin_echo", {"text": "hi"})), "admin_echo")
            if got != "admin: hi":
                raise CheckFailed(f"admin_echo returned {got!r}, expected 'admin: hi'")
            res = wire(await session.read_resource(ADMIN_SECRET))
            body = " ".join(c.get("text", "") for c in res.get("contents", []))
            if body != "The admin secret.":
                raise CheckFailed(f"{ADMIN_SECRET} read {short(res)}, expected 'The admin secret.'")
            return f"admin_echo -> {got!r}; {ADMIN_SECRET} -> {body!r}"
        if visible:
            raise CheckFailed("gated admin_echo listed to an anonymous caller")
        try:
            res = wire(await session.read_resource(ADMIN_SECRET))
        except _McpError as e:
            read_err = f"read -> {e.error.code} ({e.error.message!r})"
            # resource-not-found: -32002 up to 2025-11-25, -32602 on 2026-07-28
            if e.error.code not in (RESOURCE_NOT_FOUND, INVALID_PARAMS):
                report.note(f"{era}: reading hidden {ADMIN_SECRET} gave {e.error.code}, "
                            f"not {RESOURCE_NOT_FOUND} or {INVALID_PARAMS}")
        else:
            raise CheckFailed(f"anonymous caller could read {ADMIN_SECRET}: {short(res)}")
        try:
            res = wire(await session.call_tool("admin_echo", {"text": "hi"}))
        except _McpError as e:
            call_err = f"call -> {e.error.code} ({e.error.message!r})"
        else:
            if not res.get("isError"):
                raise CheckFailed(f"anonymous caller could call admin_echo: {short(res)}")
            call_err = f"call -> isError ({short(texts(res))})"
        return f"hidden from anonymous caller: not listed; {read_err}; {call_err}"

    # --- notifications (legacy era) ----------------------------------------------
    async def resource_subscribe_updated() -> str:
        method = "notifications/resources/updated"
        watched = lambda p: p.get("uri") == WATCHED  # noqa: E731
        await quiet_deprecated(lambda: session.subscribe_resource(WATCHED))
        mark = inbox.count(method, watched)
        res = wire(await session.call_tool("test_trigger_resource_update"))
        if res.get("isError"):
            raise CheckFailed(f"test_trigger_resource_update failed: {short(res)}")
        if not await inbox.wait_for(lambda: inbox.count(method, watched) > mark, notify_timeout):
            seen = [m for m, _ in inbox.notifications]
            raise CheckFailed(f"no {method} for {WATCHED} within {notify_timeout}s; notifications seen: {seen}")
        await quiet_deprecated(lambda: session.unsubscribe_resource(WATCHED))
        return f"subscribed, triggered, got {method} uri={WATCHED}"

    async def tool_list_changed() -> str:
        method = "notifications/tools/list_changed"

        async def names() -> set[str]:
            tools = await paginate(lambda c: session.list_tools(params=page_params(c)), "tools", "tools/list")
            return {t["name"] for t in tools}

        if "test_dynamic_tool" in await names():
            # Not a fresh server (--url, or an earlier session toggled it): toggle it away first,
            # and let that change's notification arrive before counting.
            before = inbox.count(method)
            await session.call_tool("test_trigger_tool_change")
            await inbox.wait_for(lambda: inbox.count(method) > before, notify_timeout)
            if "test_dynamic_tool" in await names():
                raise CheckFailed("test_dynamic_tool still listed after test_trigger_tool_change removed it")
        mark = inbox.count(method)
        res = wire(await session.call_tool("test_trigger_tool_change"))
        if res.get("isError"):
            raise CheckFailed(f"test_trigger_tool_change failed: {short(res)}")
        if not await inbox.wait_for(lambda: inbox.count(method) > mark, notify_timeout):
            seen = [m for m, _ in inbox.notifications]
            raise CheckFailed(f"no {method} within {notify_timeout}s; notifications seen: {seen}")
        if "test_dynamic_tool" not in await names():
            raise CheckFailed("after list_changed, tools/list still lacks test_dynamic_tool")
        got = expect_single_text(wire(await session.call_tool("test_dynamic_tool")), "test_dynamic_tool")
        if got != "dynamic tool called":
            raise CheckFailed(f"test_dynamic_tool returned {got!r}")
        return f"got {method}; test_dynamic_tool listed and callable ({got!r})"

    async def prompt_list_changed() -> str:
        method = "notifications/prompts/list_changed"

        async def names() -> set[str]:
            prompts = await paginate(lambda c: session.list_prompts(params=page_params(c)), "prompts", "prompts/list")
            return {p["name"] for p in prompts}

        if "test_dynamic_prompt" in await names():
            # Not a fresh server (--url, or an earlier session toggled it): toggle it away first,
            # and let that change's notification arrive before counting.
            before = inbox.count(method)
            await session.call_tool("test_trigger_prompt_change")
            await inbox.wait_for(lambda: inbox.count(method) > before, notify_timeout)
            if "test_dynamic_prompt" in await names():
                raise CheckFailed("test_dynamic_prompt still listed after test_trigger_prompt_change removed it")
        mark = inbox.count(method)
        res = wire(await session.call_tool("test_trigger_prompt_change"))
        if res.get("isError"):
            raise CheckFailed(f"test_trigger_prompt_change failed: {short(res)}")
        if not await inbox.wait_for(lambda: inbox.count(method) > mark, notify_timeout):
            seen = [m for m, _ in inbox.notifications]
            raise CheckFailed(f"no {method} within {notify_timeout}s; notifications seen: {seen}")
        if "test_dynamic_prompt" not in await names():
            raise CheckFailed("after list_changed, prompts/list still lacks test_dynamic_prompt")
        return f"got {method}; test_dynamic_prompt listed"

    async def logging_notifications() -> str:
        await quiet_deprecated(lambda: session.set_logging_level("debug"))
        mark = len(inbox.logs)
        res = wire(await session.call_tool("test_tool_with_logging"))
        if res.get("isError"):
            raise CheckFailed(f"test_tool_with_logging failed: {short(res)}")
        if not await inbox.wait_for(lambda: len(inbox.logs) - mark >= len(LOG_STEPS), notify_timeout):
            raise CheckFailed(
                f"got {len(inbox.logs) - mark} of {len(LOG_STEPS)} notifications/message within "
                f"{notify_timeout}s: {short(inbox.logs[mark:])}"
            )
        logs = inbox.logs[mark:]
        if len(logs) != len(LOG_STEPS):
            raise CheckFailed(f"expected {len(LOG_STEPS)} log messages, got {len(logs)}: {short(logs)}")
        levels = [m.get("level") for m in logs]
        data = [m.get("data") for m in logs]
        if levels != ["info"] * len(LOG_STEPS):
            raise CheckFailed(f"log levels {levels}, expected all 'info'")
        if data != LOG_STEPS:
            raise CheckFailed(f"log data {data}, expected {LOG_STEPS}")
        return f"{len(logs)} info messages via logging_callback: {data}"

    # --- progress --------------------------------------------------------------------
    async def progress_notifications() -> str:
        mark = len(inbox.progress)
        res = wire(await session.call_tool("test_tool_with_progress", {}, progress_callback=inbox.progress_callback))
        if res.get("isError"):
            raise CheckFailed(f"test_tool_with_progress failed: {short(res)}")
        # The SDK runs the callback as the notifications arrive, before the result; allow
        # a short grace period anyway.
        await inbox.wait_for(lambda: len(inbox.progress) - mark >= 3, notify_timeout)
        got = inbox.progress[mark:]
        if len(got) < 3:
            raise CheckFailed(f"progress_callback saw {len(got)} notifications/progress, expected >= 3: {got}")
        values = [p for p, _t, _m in got]
        if any(b <= a for a, b in zip(values, values[1:])):
            raise CheckFailed(f"progress values {values} are not strictly increasing")
        totals = {t for _p, t, _m in got}
        return f"{len(got)} notifications via progress_callback: progress {values}, total {sorted(totals, key=str)}"

    # --- interactions (server -> client requests) -------------------------------------
    async def call_answering(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """Calls a tool that asks the client something; returns the result and how it was asked.

        Legacy era: the server sends a JSON-RPC request during the call and the SDK runs
        our callback. 2026-07-28: the server answers with an input_required result, which
        is fulfilled through the SDK's own dispatch (the same callbacks) and retried.
        """
        if era == "legacy":
            return wire(await session.call_tool(name, arguments)), "server->client request"
        from mcp.client.context import ClientRequestContext  # mcp >= 2, like --modern itself

        result = await session.call_tool(name, arguments, allow_input_required=True)
        rounds = 0
        while isinstance(result, types.InputRequiredResult):
            rounds += 1
            if rounds > 10:
                raise CheckFailed(f"{name}: still input_required after 10 rounds")
            responses: dict[str, Any] = {}
            for key, req in (result.input_requests or {}).items():
                meta = req.params.meta if getattr(req, "params", None) is not None else None
                ctx = ClientRequestContext(session=session, request_id=key, meta=meta)
                answer = await session.dispatch_input_request(ctx, req)
                if isinstance(answer, types.ErrorData):
                    raise CheckFailed(f"{name}: dispatching input request {key!r} failed: {short(wire(answer))}")
                responses[key] = answer
            result = await session.call_tool(
                name,
                arguments,
                input_responses=responses or None,
                request_state=result.request_state,
                allow_input_required=True,
            )
        return wire(result), f"input_required, {rounds} round(s)"

    async def sampling() -> str:
        mark = len(inbox.sampled)
        res, how = await call_answering("test_sampling", {"prompt": SAMPLE_PROMPT})
        asked = inbox.sampled[mark:]
        if len(asked) != 1:
            raise CheckFailed(f"sampling_callback ran {len(asked)} times, expected once: {short(asked)}")
        msgs = asked[0].get("messages", [])
        prompt = [m.get("content", {}).get("text") for m in msgs if m.get("role") == "user"]
        if prompt != [SAMPLE_PROMPT]:
            raise CheckFailed(f"sampling request messages {short(msgs)} do not carry the prompt {SAMPLE_PROMPT!r}")
        got = expect_single_text(res, "test_sampling")
        if SAMPLE_ANSWER not in got:
            raise CheckFailed(f"test_sampling returned {got!r}, which lacks the client's answer {SAMPLE_ANSWER!r}")
        return f"{how}; callback got prompt {SAMPLE_PROMPT!r} (maxTokens {asked[0].get('maxTokens')}); result {got!r}"

    async def elicitation() -> str:
        mark = len(inbox.elicited)
        res, how = await call_answering("test_elicitation", {"message": ELICIT_MESSAGE})
        asked = inbox.elicited[mark:]
        if len(asked) != 1:
            raise CheckFailed(f"elicitation_callback ran {len(asked)} times, expected once: {short(asked)}")
        if asked[0].get("message") != ELICIT_MESSAGE:
            raise CheckFailed(f"elicitation message {asked[0].get('message')!r}, expected {ELICIT_MESSAGE!r}")
        schema = asked[0].get("requestedSchema", {})
        fields = sorted((schema.get("properties") or {}).keys())
        if fields != ["email", "username"] or sorted(schema.get("required", [])) != ["email", "username"]:
            raise CheckFailed(f"requestedSchema {short(schema)} is not the required username/email form")
        got = expect_single_text(res, "test_elicitation")
        missing = [v for v in ("action=accept", *ELICIT_ANSWER.values()) if v not in got]
        if missing:
            raise CheckFailed(f"test_elicitation returned {got!r}, which lacks {missing}")
        return f"{how}; callback got {ELICIT_MESSAGE!r} with fields {fields}; result {got!r}"

    await step("list_resources", list_resources)
    await step("read_static_text", read_static_text)
    await step("read_static_binary", read_static_binary)
    await step("resource_template", resource_template)
    await step("list_prompts", list_prompts)
    await step("get_prompt_with_arguments", get_prompt_with_arguments)
    await step("get_prompt_missing_argument", get_prompt_missing_argument)
    await step("complete_prompt_argument", complete_prompt_argument)
    await step("gated_items", gated_items)
    await step("progress_notifications", progress_notifications)
    await step("sampling", sampling)
    await step("elicitation", elicitation)
    if era == "legacy":
        await step("resource_subscribe_updated", resource_subscribe_updated)
        await step("tool_list_changed", tool_list_changed)
        await step("prompt_list_changed", prompt_list_changed)
        await step("logging_notifications", logging_notifications)
    else:
        report.note(f"{era}: skipped legacy-only checks {sorted(LEGACY_ONLY)}")
    if inbox.stream_errors:
        report.note(f"{era}: transport exceptions surfaced to message_handler: {short(inbox.stream_errors)}")


Connect = Callable[[], Any]  # () -> async context manager yielding (read, write)

# The line the example servers print to stderr once their HTTP listener is bound.
ANNOUNCE = re.compile(r"listening on (http://\S+)")


def stdio_connect(params: StdioServerParameters) -> Connect:
    return lambda: stdio_client(params)


def http_connect(url: str) -> Connect:
    @asynccontextmanager
    async def connect() -> AsyncIterator[tuple[Any, Any]]:
        async with _http_client(url) as streams:  # (read, write[, get_session_id])
            yield streams[0], streams[1]

    return connect


class ServerStartError(Exception):
    pass


@asynccontextmanager
async def http_server(cmd: list[str], timeout: float, report: Report) -> AsyncIterator[str]:
    """Runs `cmd --http 127.0.0.1:0`, yields the URL it announces, then kills it.

    The server's other stderr lines are passed on to ours, prefixed `[server]`.
    A server that exits by itself before the end is reported as a failed check.
    """
    argv = [*cmd, "--http", "127.0.0.1:0"]
    try:
        proc = await anyio.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
    except OSError as e:
        raise ServerStartError(f"{' '.join(argv)} could not start: {e}") from e
    found: dict[str, str] = {}
    announced = anyio.Event()

    async def pump() -> None:
        buf = b""
        assert proc.stderr is not None
        try:
            async for chunk in proc.stderr:
                buf += chunk
                while b"\n" in buf:
                    raw, buf = buf.split(b"\n", 1)
                    line = raw.decode(errors="replace")
                    m = None if "url" in found else ANNOUNCE.search(line)
                    if m:
                        found["url"] = m.group(1)
                        announced.set()
                    print(f"[server] {line}", file=sys.stderr, flush=True)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        announced.set()  # EOF: the server is gone, announced or not

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            with anyio.move_on_after(timeout):
                await announced.wait()
            if "url" not in found:
                with anyio.move_on_after(1):
                    await proc.wait()
                found["why"] = (
                    f"did not print 'listening on http://...' within {timeout}s"
                    if proc.returncode is None
                    else f"ended before announcing its URL (exit status {proc.returncode})"
                )
                tg.cancel_scope.cancel()
            else:
                print(f"[{PREFIX}] server {' '.join(argv)} (pid {proc.pid}) listening on {found['url']}", flush=True)
                try:
                    yield found["url"]
                finally:
                    if proc.returncode is not None:
                        report.fail("server", f"the HTTP server exited by itself (status {proc.returncode})")
                    await stop(proc)
    finally:
        await stop(proc)
    if "url" not in found:  # raised here, not inside the task group, so it is not wrapped
        raise ServerStartError(f"{' '.join(argv)} {found.get('why')}")


async def stop(proc: Any) -> None:
    """SIGTERM, up to 5 s to exit, then SIGKILL."""
    if proc.returncode is None:
        try:
            proc.terminate()
        except ProcessLookupError:
            pass
        with anyio.move_on_after(5):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    await proc.aclose()


async def run_session(
    connect: Connect, era: str, report: Report, timeout: float, admin: bool, notify_timeout: float
) -> None:
    started = False
    try:
        async with connect() as (read, write):
            inbox = Inbox()
            async with ClientSession(
                read,
                write,
                logging_callback=inbox.logging_callback,
                message_handler=inbox.message_handler,
                sampling_callback=inbox.sampling_callback,
                elicitation_callback=inbox.elicitation_callback,
            ) as session:
                started = True
                await run_checks(session, era, report, timeout, inbox, admin, notify_timeout)
    except Exception as e:  # noqa: BLE001 - spawn failure or transport teardown error
        # Failures inside run_checks are already reported; this is the spawn
        # or the transport itself failing (checks it cut short are reported as not run).
        if started:
            report.fail(f"{era}:transport", describe_exc(e))
        else:
            report.fail(f"{era}:connect", f"could not connect: {describe_exc(e)}")
        for name in checks_for(era):
            if f"{era}:{name}" not in report.seen:
                report.fail(f"{era}:{name}", "not run (transport failed)")


def describe_exc(e: BaseException) -> str:
    """`Type: message`, looking through the task groups' ExceptionGroup wrappers."""
    group = getattr(builtins, "BaseExceptionGroup", ())  # Python >= 3.11
    while isinstance(e, group) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    if isinstance(e, group):
        return "; ".join(describe_exc(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}"


class Options:
    def __init__(self) -> None:
        self.modern = False
        self.admin = False
        self.http = False
        self.url: str | None = None
        self.timeout = float(os.environ.get("INTEROP_TIMEOUT", "30"))
        self.notify_timeout = float(os.environ.get("INTEROP_NOTIFY_TIMEOUT", "5"))
        self.cmd: list[str] = []


def parse_args(argv: list[str]) -> Options:
    o = Options()
    i = 0
    while i < len(argv) and argv[i].startswith("--"):
        if argv[i] == "--modern":
            o.modern = True
        elif argv[i] == "--admin":
            o.admin = True
        elif argv[i] == "--http":
            o.http = True
        elif argv[i] == "--url" and i + 1 < len(argv):
            i += 1
            o.url = argv[i]
        elif argv[i] == "--timeout" and i + 1 < len(argv):
            i += 1
            o.timeout = float(argv[i])
        elif argv[i] == "--notify-timeout" and i + 1 < len(argv):
            i += 1
            o.notify_timeout = float(argv[i])
        elif argv[i] == "--":
            i += 1
            break
        else:
            sys.exit(f"{PREFIX}: unknown option {argv[i]!r}\n{__doc__}")
        i += 1
    o.cmd = argv[i:]
    if o.url is not None and (o.http or o.cmd):
        sys.exit(f"{PREFIX}: --url takes no server command and excludes --http\n{__doc__}")
    if o.url is None and not o.cmd:
        sys.exit(f"{PREFIX}: missing server command\n{__doc__}")
    return o


def eras_for(o: Options, report: Report) -> list[str]:
    """The session eras to run: legacy, and with --modern the 2026-07-28 one if the SDK has it."""
    eras = ["legacy"]
    if o.modern:
        if hasattr(ClientSession, "discover"):
            eras.append("modern")
        else:
            report.fail("modern:connect", f"mcp {SDK_VERSION} has no ClientSession.discover (needs mcp>=2)")
    return eras


def drive(
    o: Options,
    report: Report,
    eras: list[str],
    checks: Callable[[str], list[str]],
    session: Callable[[Connect, str], Any],
) -> int:
    """Connects as the options say (a URL, a server started with --http, or stdio), runs
    `session` once per era, prints the summary line run.sh reads and returns the exit status.
    A server that cannot start fails each era's checks (`checks(era)`) as not run."""

    async def sessions(connect: Connect) -> None:
        for era in eras:
            await session(connect, era)

    async def run() -> None:
        if o.url is not None:
            await sessions(http_connect(o.url))
        elif o.http:
            try:
                async with http_server(o.cmd, o.timeout, report) as url:
                    await sessions(http_connect(url))
            except ServerStartError as e:
                for era in eras:
                    report.fail(f"{era}:connect", str(e))
                    for name in checks(era)[1:]:
                        report.fail(f"{era}:{name}", "not run (connect failed)")
        else:
            # The SDK hands the child only a small allow-list of environment variables
            # (HOME, PATH, ...); pass ours through so RUST_LOG / RUST_BACKTRACE reach the server.
            await sessions(stdio_connect(StdioServerParameters(command=o.cmd[0], args=o.cmd[1:], env=dict(os.environ))))

    anyio.run(run)
    print(f"{PREFIX}: {report.passed} passed, {report.failed} failed", flush=True)
    return 0 if report.failed == 0 and report.passed > 0 else 1


def main() -> int:
    o = parse_args(sys.argv[1:])
    role = "admin" if o.admin else "anonymous"
    transport = "stdio" if o.url is None and not o.http else "streamable HTTP"
    server = o.url if o.url is not None else " ".join(o.cmd)
    print(f"[{PREFIX}] mcp (Python SDK) {SDK_VERSION}, {transport}, server: {server} (expecting {role} caller)",
          flush=True)
    report = Report()
    return drive(
        o,
        report,
        eras_for(o, report),
        checks_for,
        lambda connect, era: run_session(connect, era, report, o.timeout, o.admin, o.notify_timeout),
    )


if __name__ == "__main__":
    sys.exit(main())

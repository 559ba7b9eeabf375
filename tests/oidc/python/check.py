#!/usr/bin/env python3
"""The official Python MCP SDK client completing OAuth by itself (tests/oidc/run.sh).

Usage:
    python check.py --url MCP_URL --client-id ID --client-secret SECRET [--issuer ISSUER]
                    [--opaque] [--identity IDENTITY] [--timeout SECONDS]

Given only the MCP endpoint and the client's credentials (and, as the SDK asks of a
confidential client since mcp 2.x, the issuer those credentials belong to), the SDK's
Streamable HTTP client (`streamable_http_client` + `ClientSession`) with its
`ClientCredentialsOAuthProvider` (mcp.client.auth.extensions.client_credentials) must find
its own way: the 401 challenge, the protected resource metadata, the authorization server's
metadata, a client_credentials token for the resource. Every HTTP request the SDK makes is
recorded (an httpx2 event hook) and printed under the first check, so a failure shows how
far it got. For https:// URLs the SDK's httpx2 client trusts the CA named by SSL_CERT_FILE.

Checks (each prints `  ok    NAME` or `  FAIL  NAME: why`):
    connect        ClientSession.initialize() succeeds; the SDK read the PRM and made a
                   client_credentials token request naming resource=MCP_URL, whose token's
                   aud is MCP_URL (with --opaque: whose token is no JWT, for a server that
                   introspects it)
    list-tools     list_tools() names echo and whoami
    echo           call_tool("echo", {"text": "hi"}): the text comes back
    step-up        call_tool("whoami") with a token lacking mcp:whoami: the server answers
                   403 insufficient_scope, the SDK (SEP-2350) gets a new token asking for the
                   challenge's scopes and retries by itself; the result's roles include
                   mcp:whoami and the identity is the client id (or IDENTITY)
Ends with `oidc-python: N passed, M failed`; exit 0 only if all passed.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import traceback
import warnings
from importlib.metadata import version
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qs

import anyio
import httpx2

from mcp import ClientSession
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


class Failure(Exception):
    pass


class MemoryStorage:
    """The SDK's TokenStorage protocol, in memory (one run, one client)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def jwt_claims(jwt: str) -> dict[str, Any]:
    parts = jwt.split(".")
    if len(parts) != 3:
        raise Failure(f"the access token is no JWS compact serialization ({len(parts)} parts)")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    return json.loads(base64.urlsafe_b64decode(payload))


def wire(obj: Any) -> Any:
    return obj.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(obj, "model_dump") else obj


def texts(result: Any) -> str:
    r = wire(result)
    if r.get("isError"):
        raise Failure(f"isError result: {json.dumps(r)[:300]}")
    return "".join(c.get("text", "") for c in r.get("content", []) if c.get("type") == "text")


def describe(e: BaseException) -> str:
    """An exception, with the leaves of an exception group (anyio task groups wrap errors)."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}" + (f" (cause: {describe(e.__cause__)})" if e.__cause__ else "")


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--client-id", required=True)
    ap.add_argument("--client-secret", required=True)
    ap.add_argument("--issuer")
    ap.add_argument("--opaque", action="store_true", help="the client's tokens are opaque, not JWTs")
    ap.add_argument("--identity", help="whoami's expected identity (default: the client id)")
    ap.add_argument("--timeout", type=float, default=30)
    args = ap.parse_args()
    url: str = args.url

    passed = failed = 0
    sdk = f"mcp {version('mcp')}"
    names = {
        "connect": f"sdk {sdk}: connect (401 -> PRM -> AS metadata -> client_credentials)",
        "list": "list-tools names echo and whoami",
        "echo": 'call_tool echo {"text": "hi"}',
        "step-up": "step-up: whoami -> 403 insufficient_scope -> new token -> 200",
    }
    reported: set[str] = set()  # the checks that printed their outcome

    async def check(name: str, fn: Callable[[list[str]], Awaitable[Any]], needs: bool = True) -> Any:
        nonlocal passed, failed
        if not needs:
            failed += 1
            reported.add(name)
            print(f"  FAIL  {name}: needs the connection (an earlier check failed)", flush=True)
            return None
        notes: list[str] = []
        try:
            with anyio.fail_after(args.timeout):
                value = await fn(notes)
            passed += 1
            print(f"  ok    {name}", flush=True)
            ok = True
        except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
            failed += 1
            why = str(e) if isinstance(e, Failure) else describe(e)
            if isinstance(e, TimeoutError):
                why = f"no answer within {args.timeout:g} s"
            print(f"  FAIL  {name}: {why}", flush=True)
            value, ok = None, False
        reported.add(name)  # not reached when a transport failure cancels the check
        for line in notes:
            print(f"        {line}", flush=True)
        return value if ok else None

    # Every request the SDK's httpx2 client sends (the auth flow's included), with its status.
    seen: list[str] = []
    token_requests: list[dict[str, list[str]]] = []

    async def on_response(response: httpx2.Response) -> None:
        req = response.request
        line = f"{req.method} {req.url}"
        if req.method == "POST" and req.url.path.endswith("/token"):
            form = parse_qs(req.content.decode())
            token_requests.append(form)
            shown = {k: v[0] for k, v in form.items() if k != "client_secret"}
            line += f" {json.dumps(shown)}"
        elif req.method == "POST":
            try:
                line += f" ({json.loads(req.content).get('method', 'response')})"
            except ValueError:
                pass
        seen.append(f"{line} -> {response.status_code}")

    storage = MemoryStorage()
    with warnings.catch_warnings():
        warnings.simplefilter("error" if args.issuer else "ignore")  # no silent deprecations
        provider = ClientCredentialsOAuthProvider(
            server_url=url,
            storage=storage,
            client_id=args.client_id,
            client_secret=args.client_secret,
            issuer=args.issuer,
        )
    http = create_mcp_http_client(auth=provider)
    http.event_hooks = {"request": [], "response": [on_response]}

    prm_url = url.split("/mcp", 1)[0] + "/.well-known/oauth-protected-resource/mcp"
    try:
        async with http, streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:

                async def connect(notes: list[str]) -> bool:
                    try:
                        init = wire(await session.initialize())
                    finally:
                        notes.append(f"the SDK's requests: {' | '.join(seen)}")
                    if not init.get("protocolVersion"):
                        raise Failure(f"no initialize result: {init}")
                    if not any(s.startswith(f"GET {prm_url} -> 200") for s in seen):
                        raise Failure("the SDK did not read the protected resource metadata")
                    if not token_requests:
                        raise Failure("the SDK made no token request")
                    first = token_requests[0]
                    if first.get("grant_type") != ["client_credentials"] or first.get("resource") != [url]:
                        raise Failure(f"the token request was not client_credentials for resource={url}: {first}")
                    access_token = storage.tokens.access_token if storage.tokens else ""
                    if args.opaque:
                        if access_token.count(".") == 2:
                            raise Failure("the SDK's token looks like a JWT; expected an opaque one")
                        granted = storage.tokens.scope if storage.tokens else None
                    else:
                        claims = jwt_claims(access_token)
                        aud = claims.get("aud")
                        if aud != url and not (isinstance(aud, list) and url in aud):
                            raise Failure(f"the SDK's token names aud {aud!r}, not {url}")
                        granted = claims.get("scope")
                    notes.append(
                        f"negotiated {init['protocolVersion']}; first token asked scope="
                        f"{first.get('scope', ['(none)'])[0]!r}, granted {granted!r}"
                        + (f" (an opaque token of {len(access_token)} characters)" if args.opaque else "")
                    )
                    return True

                connected = await check(names["connect"], connect)

                async def list_tools(notes: list[str]) -> None:
                    names = [t.name for t in (await session.list_tools()).tools]
                    missing = {"echo", "whoami"} - set(names)
                    if missing:
                        raise Failure(f"{sorted(missing)} not listed: {names}")

                await check(names["list"], list_tools, bool(connected))

                async def echo(notes: list[str]) -> None:
                    text = texts(await session.call_tool("echo", {"text": "hi"}))
                    if "hi" not in text:
                        raise Failure(f"result text {text!r} lacks 'hi'")

                await check(names["echo"], echo, bool(connected))

                async def step_up(notes: list[str]) -> None:
                    held = (storage.tokens.scope if storage.tokens else None) or ""
                    if "mcp:whoami" in held.split():
                        raise Failure(f"the token already holds mcp:whoami ({held!r}): no step-up to test")
                    before, asked = len(seen), len(token_requests)
                    try:
                        text = texts(await session.call_tool("whoami", {}))
                    finally:
                        notes.append(f"the SDK's requests: {' | '.join(seen[before:])}")
                    if not any(" -> 403" in s for s in seen[before:]):
                        raise Failure("no 403 was seen: the first whoami call did not need a step-up")
                    again = token_requests[asked:]
                    if not again or "mcp:whoami" not in again[0].get("scope", [""])[0].split():
                        raise Failure(f"the SDK's new token request did not ask for mcp:whoami: {again}")
                    who = json.loads(text)
                    if "mcp:whoami" not in who.get("roles", []):
                        raise Failure(f"whoami's roles lack mcp:whoami: {text}")
                    identity = args.identity or args.client_id
                    if who.get("identity") != identity:
                        raise Failure(f"whoami's identity {who.get('identity')!r}, expected {identity!r}")
                    notes.append(f"whoami after the step-up: {text}")

                await check(names["step-up"], step_up, bool(connected))
    except Exception as e:  # noqa: BLE001 - a transport failure fails the checks it cut short
        # An error in the transport's task group cancels the check awaiting it (anyio), so the
        # check itself did not report; it and those after it fail here.
        cut = [n for n in names.values() if n not in reported]
        for n in cut or ["the SDK's transport"]:
            failed += 1
            print(f"  FAIL  {n}: the SDK's transport failed: {describe(e)}", flush=True)
        print(f"        the SDK's requests: {' | '.join(seen) or '(none)'}", flush=True)
        if not isinstance(e, (Failure, httpx2.HTTPError, BaseExceptionGroup)):
            traceback.print_exc(limit=4, file=sys.stdout)

    print(f"oidc-python: {passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))

#!/usr/bin/env node
// The token introspection checks (RFC 7662) of tests/oidc/run.sh against ONE running MCP server
// started with `--auth-issuer ISSUER --auth-resource URL --auth-introspect ENDPOINT --auth-client
// ID:SECRET` (ENDPOINT: provider.mjs's introspection_endpoint, ID:SECRET its client `mcp-rs`),
// and optionally a second one started alike but with a wrong secret.
//
// Usage: node introspect.mjs --issuer ISSUER --url MCP_URL --introspection-endpoint ENDPOINT
//            --rs-client ID:SECRET [--provider-log FILE] [--wrong-secret-url MCP_URL2]
//            [--timeout SECONDS] [--no-sdk]
//
// The tokens are provider.mjs's client `mcp-check-opaque`'s: opaque, which the server can only
// learn about by asking the endpoint. FILE is the provider's request log: the endpoint's
// requests counted in it before and after show what the server's answer cache spares it.
// Checks, in order (each prints `  ok    NAME` or `  FAIL  NAME: why`):
//   no-token          POST initialize without a token: 401, a Bearer challenge only, no error
//   as-metadata       the provider's discovery names ENDPOINT as introspection_endpoint
//   opaque-token      client_credentials (mcp-check-opaque) for MCP_URL, scope mcp:tools: Bearer,
//                     not a JWT (no two dots)
//   answer            ENDPOINT's answer for it, asked as ID:SECRET: active, aud MCP_URL, scope
//                     mcp:tools, exp ahead (what the server gets to check)
//   initialize        with the token: 200 + session id
//   initialized       notifications/initialized: 202
//   echo              tools/call echo: 200 with the text
//   cached            (with FILE) three more requests with that token: ENDPOINT not asked again
//   whoami-403        whoami (needs mcp:whoami): 403 insufficient_scope naming it
//   step-up           an opaque token with the challenge's scopes: whoami 200, its roles (from
//                     the introspected scope) include mcp:whoami
//   garbage           a made-up opaque token: 401 invalid_token; (with FILE) twice, asked once
//                     (the refusal cached)
//   wrong-audience    an opaque token for http://127.0.0.1:1/other (its answer's aud says so):
//                     401 invalid_token
//   bound-as-bearer   an opaque token bound to a DPoP key (its answer's cnf.jkt) as Bearer: 401
//                     invalid_token
//   dpop-scheme       a token with the DPoP scheme (the server takes no DPoP here): 401 with the
//                     Bearer challenge, no error
//   jwt               (info, not counted) a JWT of provider.mjs's `mcp-check` (oidc-provider
//                     refuses to introspect JWTs: 400): what the server answers
//   wrong-secret-*    (with --wrong-secret-url) the server whose endpoint refuses its client
//                     authentication (401 invalid_client): the good token, twice, and a garbage
//                     one, each 503 with Retry-After and no challenge (it fails closed, caching
//                     nothing); without a token still 401
//   sdk-*             (unless --no-sdk) the TypeScript SDK's ClientCredentialsProvider as
//                     mcp-check-opaque from the URL alone: connect, listTools, callTool echo
// Ends with `oidc-introspect: N passed, M failed`; exit 0 only if all passed.

import { Buffer } from 'node:buffer';
import * as crypto from 'node:crypto';
import { readFileSync } from 'node:fs';

import {
  assert, challenge, challenges, check, CLIENT_ID, CLIENT_ID_OPAQUE, decodeJwt, discover, dpopKey, echoCall,
  expect401, finish, flag, info, initializeRequest, introspect, mcpPost, note, opt, OTHER_RESOURCE,
  requestToken, resultText, sdkChecks, shown, thumbprint, whoamiCall,
} from './lib.mjs';

const ISSUER = opt('--issuer');
const MCP_URL = opt('--url');
const ENDPOINT = opt('--introspection-endpoint');
const RS_CLIENT = opt('--rs-client');
const PROVIDER_LOG = opt('--provider-log');
const WRONG_URL = opt('--wrong-secret-url');
if (!ISSUER || !MCP_URL || !ENDPOINT || !RS_CLIENT) {
  console.error('usage: node introspect.mjs --issuer ISSUER --url MCP_URL --introspection-endpoint ENDPOINT --rs-client ID:SECRET [--provider-log FILE] [--wrong-secret-url MCP_URL2] [--timeout SECONDS] [--no-sdk]');
  process.exit(2);
}
const SCOPE = 'mcp:tools';
const prmUrl = `${new URL(MCP_URL).origin}/.well-known/oauth-protected-resource${new URL(MCP_URL).pathname}`;
const isJwtShaped = (t) => t.split('.').length === 3;

// The introspection requests the provider has logged so far (its access log: `POST <path> -> N`).
const endpointPath = new URL(ENDPOINT).pathname;
const asked = () => readFileSync(PROVIDER_LOG, 'utf8').split('\n').filter((l) => l.includes(` POST ${endpointPath} -> `)).length;

const bearer = (token) => ({ headers: { authorization: `Bearer ${token}` } });

// ---- the challenge and the metadata ------------------------------------------------------------

await check('no-token: 401, a Bearer challenge only, no error', {}, async () => {
  const r = await mcpPost(MCP_URL, initializeRequest());
  assert(r.status === 401, `expected 401, got ${shown(r)}`);
  const all = challenges(r.headers.get('www-authenticate'));
  assert(all.length === 1 && all[0].scheme === 'bearer', `expected one Bearer challenge: ${r.headers.get('www-authenticate')}`);
  assert(all[0].params.resource_metadata === prmUrl && all[0].params.error === undefined, `WWW-Authenticate: ${r.headers.get('www-authenticate')}`);
});

const asMeta = await check('as-metadata: introspection_endpoint is the one the server asks', {}, async () => {
  const doc = await discover(ISSUER);
  assert(doc.introspection_endpoint === ENDPOINT, `introspection_endpoint ${doc.introspection_endpoint}, expected ${ENDPOINT}`);
  return doc;
});

async function opaqueToken({ resource = MCP_URL, scope = SCOPE, dpop } = {}) {
  const body = await requestToken(asMeta.token_endpoint, { clientId: CLIENT_ID_OPAQUE, resource, scope, dpop });
  assert(!isJwtShaped(body.access_token), `the token looks like a JWT: ${body.access_token.slice(0, 40)}...`);
  return body;
}

const token = await check('opaque-token: client_credentials as mcp-check-opaque: Bearer, not a JWT', { asMeta }, async () => {
  const body = await opaqueToken();
  assert(/^bearer$/i.test(body.token_type), `token_type ${body.token_type}`);
  note(`an opaque token of ${body.access_token.length} characters`);
  return body.access_token;
});

await check('answer: the endpoint says active, aud = the resource, scope, exp', { token }, async () => {
  const a = await introspect(ENDPOINT, RS_CLIENT, token);
  assert(a.active === true, `active ${a.active}: ${JSON.stringify(a)}`);
  assert(a.aud === MCP_URL || (Array.isArray(a.aud) && a.aud.includes(MCP_URL)), `aud ${JSON.stringify(a.aud)} (oidc-provider gives no audience?): ${JSON.stringify(a)}`);
  assert(a.scope === SCOPE, `scope ${JSON.stringify(a.scope)}`);
  assert(Number.isInteger(a.exp) && a.exp > Date.now() / 1000, `exp ${a.exp}`);
  note(`introspection answer: ${JSON.stringify(a)}`);
});

// ---- MCP with the opaque token ----------------------------------------------------------------------

const session = await check('initialize with the opaque token: 200 + session id', { token }, async () => {
  const r = await mcpPost(MCP_URL, initializeRequest(), bearer(token));
  assert(r.status === 200, `expected 200, got ${shown(r)}`);
  assert(r.message?.result?.protocolVersion, `no initialize result: ${r.text.slice(0, 300)}`);
  const id = r.headers.get('mcp-session-id');
  assert(id, 'no mcp-session-id header');
  return id;
});

await check('notifications/initialized: 202', { token, session }, async () => {
  const r = await mcpPost(MCP_URL, { jsonrpc: '2.0', method: 'notifications/initialized' }, { ...bearer(token), session });
  assert(r.status === 202, `expected 202, got ${shown(r)}`);
});

await check('tools/call echo: 200 with the text', { token, session }, async () => {
  const r = await mcpPost(MCP_URL, echoCall(2, 'hi, opaquely'), { ...bearer(token), session });
  assert(r.status === 200, `expected 200, got ${shown(r)}`);
  assert(resultText(r).includes('hi, opaquely'), `the echo does not come back: ${r.text.slice(0, 200)}`);
});

if (PROVIDER_LOG) {
  await check('cached: three more requests with the token, the endpoint not asked again', { token, session }, async () => {
    const before = asked();
    for (let i = 0; i < 3; i++) {
      const r = await mcpPost(MCP_URL, { jsonrpc: '2.0', id: 20 + i, method: 'tools/list', params: {} }, { ...bearer(token), session });
      assert(r.status === 200, `tools/list ${i + 1}: expected 200, got ${shown(r)}`);
    }
    assert(asked() === before, `the endpoint was asked ${asked() - before} more time(s)`);
    note(`introspection requests so far: ${before}`);
  });
}

// ---- step-up: the scopes come from the answer -----------------------------------------------------------

const challenged = await check('whoami without mcp:whoami: 403 insufficient_scope naming it', { token, session }, async () => {
  const r = await mcpPost(MCP_URL, whoamiCall(10), { ...bearer(token), session });
  assert(r.status === 403, `expected 403, got ${shown(r)}`);
  const c = challenge(r, 'bearer');
  assert(c?.params.error === 'insufficient_scope', `WWW-Authenticate: ${r.headers.get('www-authenticate')}`);
  const scopes = (c.params.scope ?? '').split(' ');
  assert(scopes[0] === 'mcp:whoami' && scopes.includes(SCOPE), `scope "${c.params.scope}"`);
  return c.params.scope;
});

await check('step-up: an opaque token with the challenge\'s scopes: whoami 200', { challenged, session }, async () => {
  const wide = (await opaqueToken({ scope: challenged })).access_token;
  const r = await mcpPost(MCP_URL, whoamiCall(11), { ...bearer(wide), session });
  assert(r.status === 200, `expected 200, got ${shown(r)}`);
  const who = JSON.parse(resultText(r));
  assert(who.roles?.includes('mcp:whoami') && who.roles.includes(SCOPE), `roles ${JSON.stringify(who.roles)}`);
  // No `sub` in the answer for a client_credentials token: the server names the client.
  assert(typeof who.identity === 'string' && who.identity.endsWith(CLIENT_ID_OPAQUE), `identity ${JSON.stringify(who.identity)}`);
  note(`whoami: ${JSON.stringify(who)}`);
});

// ---- refusals ----------------------------------------------------------------------------------------------

await check('garbage: a made-up opaque token: 401 invalid_token (the refusal cached)', {}, async () => {
  const garbage = crypto.randomBytes(32).toString('base64url');
  const before = PROVIDER_LOG ? asked() : 0;
  for (let i = 0; i < 2; i++) {
    const r = await mcpPost(MCP_URL, initializeRequest(30 + i), bearer(garbage));
    expect401(r, 'bearer', 'invalid_token', `a made-up token (${i + 1})`);
  }
  if (PROVIDER_LOG) assert(asked() - before === 1, `the endpoint was asked ${asked() - before} times for it, expected once`);
});

await check('wrong-audience: an opaque token for another resource: 401 invalid_token', { asMeta }, async () => {
  const t = (await opaqueToken({ resource: OTHER_RESOURCE })).access_token;
  const a = await introspect(ENDPOINT, RS_CLIENT, t);
  assert(a.active === true && a.aud === OTHER_RESOURCE, `the endpoint's answer for it: ${JSON.stringify(a)} (expected active, aud ${OTHER_RESOURCE})`);
  expect401(await mcpPost(MCP_URL, initializeRequest(32), bearer(t)), 'bearer', 'invalid_token', 'a token for another resource');
});

await check('bound-as-bearer: a DPoP-bound opaque token as Bearer: 401 invalid_token', { asMeta }, async () => {
  const key = dpopKey('ES256');
  const body = await opaqueToken({ dpop: key });
  assert(body.token_type === 'DPoP', `token_type ${body.token_type}`);
  const a = await introspect(ENDPOINT, RS_CLIENT, body.access_token);
  assert(a.cnf?.jkt === thumbprint(key.jwk), `the endpoint's answer names no cnf.jkt of the key: ${JSON.stringify(a)}`);
  expect401(await mcpPost(MCP_URL, initializeRequest(33), bearer(body.access_token)), 'bearer', 'invalid_token', 'a bound token as Bearer');
});

await check('dpop-scheme: the DPoP scheme where DPoP is off: 401 Bearer challenge, no error', { token }, async () => {
  const r = await mcpPost(MCP_URL, initializeRequest(34), { headers: { authorization: `DPoP ${token}` } });
  assert(r.status === 401, `expected 401, got ${shown(r)}`);
  const all = challenges(r.headers.get('www-authenticate'));
  assert(all.length === 1 && all[0].scheme === 'bearer' && all[0].params.error === undefined, `WWW-Authenticate: ${r.headers.get('www-authenticate')}`);
});

if (asMeta) {
  // Not counted: what a JWT makes of an introspecting server is the endpoint's doing.
  try {
    const jwt = (await requestToken(asMeta.token_endpoint, { clientId: CLIENT_ID, resource: MCP_URL, scope: SCOPE })).access_token;
    decodeJwt(jwt);
    const res = await fetch(ENDPOINT, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(RS_CLIENT).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: jwt }),
      signal: AbortSignal.timeout(15000),
    });
    const endpointSays = `${res.status} ${(await res.text()).slice(0, 160)}`;
    const r = await mcpPost(MCP_URL, initializeRequest(35), bearer(jwt));
    info(
      `jwt: a valid JWT of ${CLIENT_ID} for this resource -> ${r.status}${r.headers.get('retry-after') ? ` (Retry-After: ${r.headers.get('retry-after')})` : ''} ${r.text.slice(0, 100)}`,
      `the endpoint, asked about it: ${endpointSays}`,
    );
  } catch (e) {
    info(`jwt: could not try a JWT: ${e?.message ?? e}`);
  }
}

// ---- the server whose endpoint refuses its credentials ------------------------------------------------------

if (WRONG_URL) {
  const expect503 = (r, what) => {
    assert(r.status === 503, `${what}: expected 503, got ${shown(r)}`);
    assert(r.headers.get('retry-after'), `${what}: no Retry-After`);
    assert(!r.headers.get('www-authenticate'), `${what}: a challenge on a 503: ${r.headers.get('www-authenticate')}`);
  };
  await check('wrong-secret: the good token, twice: 503 + Retry-After, no challenge (fails closed)', { token }, async () => {
    expect503(await mcpPost(WRONG_URL, initializeRequest(40), bearer(token)), 'initialize');
    const r = await mcpPost(WRONG_URL, initializeRequest(41), bearer(token));
    expect503(r, 'initialize again');
    note(`body: ${r.text.slice(0, 100)}`);
  });
  await check('wrong-secret: a made-up token: 503', {}, async () => {
    expect503(await mcpPost(WRONG_URL, initializeRequest(42), bearer(crypto.randomBytes(32).toString('base64url'))), 'a made-up token');
  });
  await check('wrong-secret: no token: still 401 with the challenge', {}, async () => {
    const r = await mcpPost(WRONG_URL, initializeRequest(43));
    assert(r.status === 401 && challenge(r, 'bearer'), `expected 401 + Bearer challenge, got ${shown(r)}`);
  });
}

if (!flag('--no-sdk')) {
  await sdkChecks({
    url: MCP_URL,
    issuer: ISSUER,
    clientId: CLIENT_ID_OPAQUE,
    tokenCheck: (t) => assert(!isJwtShaped(t), 'the SDK\'s token is a JWT, expected an opaque one'),
  });
}

finish('oidc-introspect');

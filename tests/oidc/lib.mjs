// Helpers shared by dpop.mjs and introspect.mjs (tests/oidc/run.sh): argument parsing, the check
// runner and its summary line, MCP POSTs with any Authorization / DPoP headers, the parsing of
// a WWW-Authenticate header holding several challenges, DPoP keys and proofs (RFC 9449) made with
// node:crypto alone, and token requests to provider.mjs (with a DPoP proof and the provider's
// nonce retry when asked).

import { Buffer } from 'node:buffer';
import * as crypto from 'node:crypto';
import { readFileSync } from 'node:fs';

// ---- arguments and checks ----------------------------------------------------------------------

const args = process.argv.slice(2);
export function opt(name, fallback) {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
}
export const flag = (name) => args.includes(name);

export const TIMEOUT_MS = Number(opt('--timeout', '15')) * 1000;
export const timeout = () => AbortSignal.timeout(TIMEOUT_MS);
export const PROTOCOL_VERSION = '2025-06-18';

// provider.mjs's clients.
export const CLIENT_ID = 'mcp-check';
export const CLIENT_ID_OPAQUE = 'mcp-check-opaque';
export const CLIENT_SECRET = 'mcp-check-secret';
export const OTHER_RESOURCE = 'http://127.0.0.1:1/other';

let passed = 0;
let failed = 0;
export class Failure extends Error {}
export function assert(cond, msg) {
  if (!cond) throw new Failure(msg);
}

let notes = [];
/** A line printed below the running check's ok/FAIL line. */
export const note = (line) => notes.push(line);
function flushNotes() {
  for (const line of notes) console.log(`        ${line}`);
  notes = [];
}

/** Runs one check; returns its value (true if none), or undefined when it or a prerequisite
 * (a `needs` entry that is undefined) failed. */
export async function check(name, needs, fn) {
  const missing = Object.entries(needs).filter(([, v]) => v === undefined).map(([k]) => k);
  if (missing.length) {
    failed++;
    console.log(`  FAIL  ${name}: needs ${missing.join(', ')} (an earlier check failed)`);
    notes = [];
    return undefined;
  }
  try {
    const value = await fn();
    passed++;
    console.log(`  ok    ${name}`);
    flushNotes();
    return value ?? true;
  } catch (e) {
    failed++;
    const why = e instanceof Failure ? e.message : `${e?.name ?? 'Error'}: ${e?.message ?? e}${e?.cause ? ` (cause: ${e.cause.message ?? e.cause})` : ''}`;
    console.log(`  FAIL  ${name}: ${why}`);
    flushNotes();
    return undefined;
  }
}

/** An observation printed but not counted. */
export function info(line, ...more) {
  console.log(`  info  ${line}`);
  for (const m of more) console.log(`        ${m}`);
}

/** Prints `PREFIX: N passed, M failed` and exits (0 only if all passed). */
export function finish(prefix) {
  console.log(`${prefix}: ${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

// ---- HTTP ----------------------------------------------------------------------------------------

export const initializeRequest = (id = 1, name = 'oidc-check') => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name, version: '1' } },
});
export const echoCall = (id, text) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text } } });
export const whoamiCall = (id) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'whoami', arguments: {} } });

/** POSTs one JSON-RPC message to `url` with `headers` added (authorization, dpop, ...) and the
 * session's headers when `session` is given. Returns { status, headers, message, text }:
 * `message` is the JSON-RPC response with the request's id (from a JSON body or an SSE stream). */
export async function mcpPost(url, body, { headers: extra = {}, session } = {}) {
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...extra,
  };
  if (session) {
    headers['mcp-session-id'] = session;
    headers['mcp-protocol-version'] = PROTOCOL_VERSION;
  }
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`no answer within ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
  try {
    const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body), signal: controller.signal });
    const type = res.headers.get('content-type') ?? '';
    let message;
    let text = '';
    if (res.status === 200 && type.startsWith('text/event-stream')) {
      // Read events until the response to this request (the stream may stay open after it).
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buf = '';
      outer: for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        const chunk = decoder.decode(value, { stream: true });
        buf += chunk;
        text += chunk;
        let end;
        while ((end = buf.search(/\r?\n\r?\n/)) >= 0) {
          const event = buf.slice(0, end);
          buf = buf.slice(end).replace(/^\r?\n\r?\n/, '');
          const data = event.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
          if (!data) continue;
          const msg = JSON.parse(data);
          if (msg.id === body.id && ('result' in msg || 'error' in msg)) {
            message = msg;
            break outer;
          }
        }
      }
      await reader.cancel().catch(() => {});
    } else {
      text = await res.text();
      if (type.startsWith('application/json') && text) {
        const parsed = JSON.parse(text);
        message = Array.isArray(parsed) ? parsed.find((m) => m.id === body.id) : parsed;
      }
    }
    return { status: res.status, headers: res.headers, message, text };
  } finally {
    clearTimeout(timer);
  }
}

/** A response's one-line description for failure messages. */
export const shown = (r) => `${r.status} ${r.text.slice(0, 200)} (WWW-Authenticate: ${r.headers.get('www-authenticate')})`;

/** The text content of a successful tools/call response. */
export function resultText(r) {
  const result = r.message?.result;
  assert(result && !result.isError, `no successful result: ${JSON.stringify(r.message ?? r.text).slice(0, 300)}`);
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
}

/** The challenges of a WWW-Authenticate value (RFC 9110 §11.6.1), in order:
 * [{ scheme (lowercased), params: { name (lowercased): value } }]. Throws on a malformed one. */
export function challenges(header) {
  assert(header, 'no WWW-Authenticate header');
  const out = [];
  const re = /\s*,?\s*([A-Za-z0-9!#$%&'*+.^_`|~-]+)(?:\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]*)))?/y;
  let m;
  let pos = 0;
  while (pos < header.length && (m = re.exec(header))) {
    pos = re.lastIndex;
    if (m[2] === undefined && m[3] === undefined) {
      out.push({ scheme: m[1].toLowerCase(), params: {} });
    } else {
      assert(out.length, `WWW-Authenticate starts with a parameter: ${header}`);
      out[out.length - 1].params[m[1].toLowerCase()] = m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3];
    }
  }
  assert(/^\s*$/.test(header.slice(pos)), `WWW-Authenticate unparsable from character ${pos}: ${header}`);
  return out;
}

/** The response's challenge for `scheme` ('bearer', 'dpop'), or undefined. */
export function challenge(r, scheme) {
  return challenges(r.headers.get('www-authenticate')).find((c) => c.scheme === scheme);
}

/** Asserts a 401 whose `scheme` challenge carries error=`error`; returns that challenge. */
export function expect401(r, scheme, error, what) {
  assert(r.status === 401, `${what}: expected 401, got ${shown(r)}`);
  const c = challenge(r, scheme);
  assert(c, `${what}: no ${scheme} challenge in WWW-Authenticate: ${r.headers.get('www-authenticate')}`);
  assert(c.params.error === error, `${what}: expected ${scheme} error="${error}", got WWW-Authenticate: ${r.headers.get('www-authenticate')}`);
  return c;
}

export function decodeJwt(jwt) {
  const parts = jwt.split('.');
  assert(parts.length === 3, `the access token is no JWS compact serialization (${parts.length} parts)`);
  const part = (s) => JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));
  return { header: part(parts[0]), payload: part(parts[1]) };
}

export async function discover(issuer) {
  const res = await fetch(`${issuer}/.well-known/openid-configuration`, { headers: { accept: 'application/json' }, signal: timeout() });
  assert(res.status === 200, `${issuer}'s discovery: ${res.status}`);
  return res.json();
}

// ---- DPoP (RFC 9449) ------------------------------------------------------------------------------

/** A fresh key pair for DPoP proofs with `alg` (ES256, EdDSA, RS256, PS256): { alg, privateKey,
 * jwk (public members only) }. */
export function dpopKey(alg) {
  const pair = {
    ES256: () => crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }),
    EdDSA: () => crypto.generateKeyPairSync('ed25519'),
    RS256: () => crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }),
    PS256: () => crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }),
  }[alg]();
  const { kty, crv, x, y, n, e } = pair.publicKey.export({ format: 'jwk' });
  const jwk = Object.fromEntries(Object.entries({ kty, crv, x, y, n, e }).filter(([, v]) => v !== undefined));
  return { alg, privateKey: pair.privateKey, jwk };
}

function signWith(key, input) {
  const data = Buffer.from(input);
  switch (key.alg) {
    case 'ES256':
      return crypto.sign('sha256', data, { key: key.privateKey, dsaEncoding: 'ieee-p1363' });
    case 'EdDSA':
      return crypto.sign(null, data, key.privateKey);
    case 'RS256':
      return crypto.sign('sha256', data, key.privateKey);
    case 'PS256':
      return crypto.sign('sha256', data, { key: key.privateKey, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 });
    default:
      throw new Error(`no signer for ${key.alg}`);
  }
}

/** The JWK SHA-256 thumbprint (RFC 7638) of a public JWK. */
export function thumbprint(jwk) {
  const members = { RSA: ['e', 'kty', 'n'], EC: ['crv', 'kty', 'x', 'y'], OKP: ['crv', 'kty', 'x'] }[jwk.kty];
  const json = `{${members.map((m) => `${JSON.stringify(m)}:${JSON.stringify(jwk[m])}`).join(',')}}`;
  return crypto.createHash('sha256').update(json).digest('base64url');
}

/** ath: base64url(SHA-256(access token)). */
export const ath = (token) => crypto.createHash('sha256').update(token).digest('base64url');

/** A DPoP proof JWT by `key` for `htm` on `htu`: typ dpop+jwt, the key's alg and public jwk, a
 * fresh jti, iat now; `ath` for `accessToken`, `nonce` when given. `signer` signs instead of
 * `key` (a proof naming one key but signed by another); `header` / `claims` override members. */
export function dpopProof(key, { htm = 'POST', htu, accessToken, nonce, signer = key, header = {}, claims = {} }) {
  const h = { typ: 'dpop+jwt', alg: key.alg, jwk: key.jwk, ...header };
  const c = { htm, htu, iat: Math.floor(Date.now() / 1000), jti: crypto.randomUUID() };
  if (accessToken !== undefined) c.ath = ath(accessToken);
  if (nonce !== undefined) c.nonce = nonce;
  Object.assign(c, claims);
  const b64 = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const input = `${b64(h)}.${b64(c)}`;
  return `${input}.${signWith(signer, input).toString('base64url')}`;
}

// ---- tokens from provider.mjs --------------------------------------------------------------------------

// The authorization server's latest DPoP nonce (RFC 9449 §8), per token endpoint.
const asNonces = new Map();

/** A client_credentials token response from `tokenEndpoint` (client_secret_basic): the parsed
 * body, asserted 200 with an access_token. With `dpop` (a dpopKey) the request carries a proof for
 * the token endpoint, and a `400 use_dpop_nonce` is retried once with the nonce the provider
 * sent (its `dpop-nonce` header; the last one seen is used from the start). The body gets
 * `nonceRetry: true` when that retry happened. */
export async function requestToken(tokenEndpoint, { clientId = CLIENT_ID, secret = CLIENT_SECRET, resource, scope, dpop } = {}) {
  const form = { grant_type: 'client_credentials', resource };
  if (scope !== undefined) form.scope = scope;
  let nonceRetry = false;
  for (let attempt = 1; ; attempt++) {
    const headers = {
      authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    };
    if (dpop) headers.dpop = dpopProof(dpop, { htu: tokenEndpoint, nonce: asNonces.get(tokenEndpoint) });
    const res = await fetch(tokenEndpoint, { method: 'POST', headers, body: new URLSearchParams(form), signal: timeout() });
    const text = await res.text();
    const nonce = res.headers.get('dpop-nonce');
    if (nonce) asNonces.set(tokenEndpoint, nonce);
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      throw new Failure(`token endpoint answered ${res.status} with no JSON: ${text.slice(0, 300)}`);
    }
    if (dpop && attempt === 1 && res.status === 400 && body.error === 'use_dpop_nonce' && nonce) {
      nonceRetry = true;
      continue;
    }
    assert(res.status === 200, `token endpoint answered ${res.status}: ${text.slice(0, 300)}`);
    assert(typeof body.access_token === 'string', `no access_token in ${text.slice(0, 300)}`);
    return { ...body, nonceRetry };
  }
}

/** The introspection answer for `token` at `endpoint`, asked as the client `id:secret`. */
export async function introspect(endpoint, credentials, token) {
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(credentials).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    },
    body: new URLSearchParams({ token, token_type_hint: 'access_token' }),
    signal: timeout(),
  });
  const text = await res.text();
  assert(res.status === 200, `the introspection endpoint answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

// ---- the TypeScript SDK ------------------------------------------------------------------------------------

/** The official TypeScript SDK's client (ClientCredentialsProvider) from `url` alone, as the
 * client `clientId`: connect, listTools, callTool echo; 3 checks. `tokenCheck(token)` may assert
 * more of the SDK's access token. */
export async function sdkChecks({ url, issuer, clientId, scope = 'mcp:tools', tokenCheck = () => {} }) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const { ClientCredentialsProvider } = await import('@modelcontextprotocol/sdk/client/auth-extensions.js');
  const sdkVersion = JSON.parse(
    readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url), 'utf8'),
  ).version;
  const seen = [];
  const recordingFetch = async (input, init) => {
    const u = typeof input === 'string' ? input : input.url ?? String(input);
    const res = await fetch(input, { ...init, signal: init?.signal ?? timeout() });
    seen.push(`${init?.method ?? 'GET'} ${u} -> ${res.status}`);
    return res;
  };
  const trace = () => `; requests: ${seen.join(' | ')}`;
  const provider = new ClientCredentialsProvider({ clientId, clientSecret: CLIENT_SECRET, expectedIssuer: issuer, scope, clientName: 'oidc-check-sdk' });
  const client = new Client({ name: 'oidc-check-sdk', version: '1' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: recordingFetch });
  const connected = await check(`sdk ${sdkVersion}: connect as ${clientId} (401 -> PRM -> AS metadata -> client_credentials)`, {}, async () => {
    try {
      await client.connect(transport, { timeout: TIMEOUT_MS });
    } catch (e) {
      throw new Failure(`${e?.message ?? e}${trace()}`);
    }
    assert(seen.some((s) => s.startsWith('POST ') && s.includes('/token ')), `the SDK made no token request${trace()}`);
    const token = provider.tokens()?.access_token;
    assert(token, 'the SDK holds no access token');
    tokenCheck(token);
    note(`the SDK's requests: ${seen.join(' | ')}`);
    return true;
  });
  await check('sdk: listTools names echo', { connected }, async () => {
    const { tools } = await client.listTools(undefined, { timeout: TIMEOUT_MS });
    assert(tools.some((t) => t.name === 'echo'), `echo not listed: ${JSON.stringify(tools.map((t) => t.name))}`);
  });
  await check('sdk: callTool echo', { connected }, async () => {
    const result = await client.callTool({ name: 'echo', arguments: { text: 'hi from the sdk' } }, undefined, { timeout: TIMEOUT_MS });
    const text = (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
    assert(!result.isError && text.includes('hi from the sdk'), `result ${JSON.stringify(result).slice(0, 300)}`);
  });
  await client.close().catch(() => {});
}

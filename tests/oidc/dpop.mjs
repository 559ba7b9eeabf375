#!/usr/bin/env node
// The DPoP checks (RFC 9449) of tests/oidc/run.sh against ONE running MCP server started with
// `--auth-issuer ISSUER --auth-resource URL --auth-dpop`, ISSUER being provider.mjs.
//
// Usage: node dpop.mjs --issuer ISSUER --url MCP_URL [--timeout SECONDS] [--no-sdk]
//
// Keys and proofs are made here with node:crypto (lib.mjs); the provider binds a
// client_credentials token to the key of the DPoP proof its token request carries (after its
// use_dpop_nonce retry: provider.mjs requires its nonce). "A proof" below is a fresh one (new
// jti, iat now) for POST on MCP_URL with the token's ath, unless said otherwise. Checks, in order
// (each prints `  ok    NAME` or `  FAIL  NAME: why`):
//   no-token          POST initialize without a token: 401 whose WWW-Authenticate holds a Bearer
//                     and a DPoP challenge, DPoP's algs="ES256 EdDSA RS256 PS256", both with
//                     resource_metadata and neither with an error
//   prm               the protected resource metadata names those algs
//                     (dpop_signing_alg_values_supported)
//   as-metadata       the provider's discovery offers DPoP with ES256
//   dpop-token        an ES256 key; client_credentials for MCP_URL with a proof for the token
//                     endpoint: token_type DPoP, a JWT whose cnf.jkt is the key's RFC 7638
//                     thumbprint, aud MCP_URL
//   initialize        `Authorization: DPoP <token>` + a proof: 200 + session id
//   initialized       notifications/initialized, a new proof: 202
//   echo              tools/call echo, a new proof: 200 with the text
//   replay            the echo's proof once more: 401, DPoP error="invalid_dpop_proof"
//   no-proof          the DPoP scheme without a DPoP header: 401 invalid_dpop_proof
//   htm-get           a proof for GET: 401 invalid_dpop_proof
//   htu-other         a proof for another URL (same origin, /other): 401 invalid_dpop_proof
//   iat-old           a proof made 5 minutes ago: 401 invalid_dpop_proof
//   ath-other         a proof bound to another token: 401 invalid_dpop_proof
//   other-key         a proof by another key (carrying that key): 401, invalid_token (not the
//                     token's key) or invalid_dpop_proof
//   forged-signature  a proof carrying the token's key but signed by another: 401
//                     invalid_dpop_proof
//   bound-as-bearer   the bound token as `Bearer` (no proof): 401 invalid_token
//   bearer-token      a token request without a proof: token_type Bearer, no cnf
//   bearer-as-dpop    a plain bearer token with the DPoP scheme and a good proof: 401 invalid_token
//   bearer            a plain bearer token as `Bearer`: initialize 200 (bearer tokens still work)
//   whoami-403        whoami with the bound token (mcp:tools only): 403 insufficient_scope in
//                     both challenges, scope naming mcp:whoami
//   step-up           a bound token (same key) with the challenge's scopes: whoami 200, roles
//                     include mcp:whoami
//   alg EdDSA, RS256, PS256  a key of that kind, a bound token, initialize with its proof: 200
//   sdk-*             (unless --no-sdk) the TypeScript SDK's ClientCredentialsProvider from the
//                     URL alone (it sends no DPoP: bearer tokens, the two-scheme challenge):
//                     connect, listTools, callTool echo
// Ends with `oidc-dpop: N passed, M failed`; exit 0 only if all passed.

import {
  assert, challenge, challenges, check, CLIENT_ID, decodeJwt, discover, dpopKey, dpopProof, echoCall,
  expect401, finish, flag, initializeRequest, mcpPost, note, opt, requestToken, resultText, sdkChecks,
  shown, thumbprint, whoamiCall,
} from './lib.mjs';

const ISSUER = opt('--issuer');
const MCP_URL = opt('--url');
if (!ISSUER || !MCP_URL) {
  console.error('usage: node dpop.mjs --issuer ISSUER --url MCP_URL [--timeout SECONDS] [--no-sdk]');
  process.exit(2);
}
const ALGS = ['ES256', 'EdDSA', 'RS256', 'PS256']; // what the server is configured to take
const SCOPE = 'mcp:tools';
const origin = new URL(MCP_URL).origin;
const prmUrl = `${origin}/.well-known/oauth-protected-resource${new URL(MCP_URL).pathname}`;

// `Authorization: DPoP` with a fresh proof by `key` (overrides as for dpopProof).
const dpopHeaders = (token, key, proof = {}) => ({
  authorization: `DPoP ${token}`,
  dpop: dpopProof(key, { htu: MCP_URL, accessToken: token, ...proof }),
});

function expectBadProof(r, what) {
  const c = expect401(r, 'dpop', 'invalid_dpop_proof', what);
  assert(c.params.algs === ALGS.join(' '), `${what}: DPoP algs="${c.params.algs}", expected "${ALGS.join(' ')}"`);
  note(`WWW-Authenticate: ${r.headers.get('www-authenticate')}`);
}

// ---- the challenge and the metadata ------------------------------------------------------------

await check('no-token: 401 with a Bearer and a DPoP challenge', {}, async () => {
  const r = await mcpPost(MCP_URL, initializeRequest());
  assert(r.status === 401, `expected 401, got ${shown(r)}`);
  const header = r.headers.get('www-authenticate');
  const all = challenges(header);
  assert(all.map((c) => c.scheme).join(',') === 'bearer,dpop', `expected the challenges Bearer, DPoP; got ${header}`);
  for (const c of all) {
    assert(c.params.resource_metadata === prmUrl, `${c.scheme}: resource_metadata ${c.params.resource_metadata}, expected ${prmUrl} (${header})`);
    assert(c.params.error === undefined, `${c.scheme}: an error code although no credentials were sent: ${header}`);
  }
  assert(all[1].params.algs === ALGS.join(' '), `DPoP algs="${all[1].params.algs}", expected "${ALGS.join(' ')}"`);
  note(`WWW-Authenticate: ${header}`);
});

await check('prm: dpop_signing_alg_values_supported names the algs', {}, async () => {
  const res = await fetch(prmUrl, { signal: AbortSignal.timeout(15000) });
  assert(res.status === 200, `GET ${prmUrl}: ${res.status}`);
  const doc = await res.json();
  assert(doc.resource === MCP_URL, `resource ${doc.resource}`);
  assert(JSON.stringify(doc.dpop_signing_alg_values_supported) === JSON.stringify(ALGS), `dpop_signing_alg_values_supported ${JSON.stringify(doc.dpop_signing_alg_values_supported)}`);
});

const asMeta = await check('as-metadata: the provider offers DPoP (ES256)', {}, async () => {
  const doc = await discover(ISSUER);
  assert((doc.dpop_signing_alg_values_supported ?? []).includes('ES256'), `dpop_signing_alg_values_supported ${JSON.stringify(doc.dpop_signing_alg_values_supported)}`);
  note(`the provider's dpop_signing_alg_values_supported: ${JSON.stringify(doc.dpop_signing_alg_values_supported)}`);
  return doc;
});

// ---- a bound token and its use -------------------------------------------------------------------

const key = dpopKey('ES256');
const other = dpopKey('ES256');

// A DPoP-bound token for MCP_URL, its binding checked.
async function boundToken(k, scope = SCOPE) {
  const body = await requestToken(asMeta.token_endpoint, { resource: MCP_URL, scope, dpop: k });
  assert(body.token_type === 'DPoP', `token_type ${body.token_type}, expected DPoP`);
  const { payload } = decodeJwt(body.access_token);
  assert(payload.cnf?.jkt === thumbprint(k.jwk), `cnf ${JSON.stringify(payload.cnf)}, expected jkt ${thumbprint(k.jwk)}`);
  assert(payload.aud === MCP_URL, `aud ${JSON.stringify(payload.aud)}`);
  if (body.nonceRetry) note('the provider asked for its DPoP nonce first (400 use_dpop_nonce), the retry with it got the token');
  return body.access_token;
}

const token = await check('dpop-token: a token bound to the ES256 key (token_type DPoP, cnf.jkt)', { asMeta }, async () => boundToken(key));

const session = await check('initialize with DPoP + proof: 200 + session id', { token }, async () => {
  const r = await mcpPost(MCP_URL, initializeRequest(), { headers: dpopHeaders(token, key) });
  assert(r.status === 200, `expected 200, got ${shown(r)}`);
  assert(r.message?.result?.protocolVersion, `no initialize result: ${r.text.slice(0, 300)}`);
  const id = r.headers.get('mcp-session-id');
  assert(id, 'no mcp-session-id header');
  return id;
});

await check('notifications/initialized, a new proof: 202', { token, session }, async () => {
  const r = await mcpPost(MCP_URL, { jsonrpc: '2.0', method: 'notifications/initialized' }, { headers: dpopHeaders(token, key), session });
  assert(r.status === 202, `expected 202, got ${shown(r)}`);
});

// The headers (and so the proof) of a request that was served: to replay.
const echoHeaders = await check('tools/call echo, a new proof: 200 with the text', { token, session }, async () => {
  const headers = dpopHeaders(token, key);
  const r = await mcpPost(MCP_URL, echoCall(2, 'hi with dpop'), { headers, session });
  assert(r.status === 200, `expected 200, got ${shown(r)}`);
  assert(resultText(r).includes('hi with dpop'), `the echo does not come back: ${r.text.slice(0, 200)}`);
  return headers;
});

// ---- refused proofs --------------------------------------------------------------------------------

await check('replay: the same proof again: 401 invalid_dpop_proof', { echoHeaders, session }, async () => {
  expectBadProof(await mcpPost(MCP_URL, echoCall(3, 'again'), { headers: echoHeaders, session }), 'a replayed proof');
});

await check('no proof (DPoP scheme, no DPoP header): 401 invalid_dpop_proof', { token }, async () => {
  expectBadProof(await mcpPost(MCP_URL, initializeRequest(4), { headers: { authorization: `DPoP ${token}` } }), 'no proof');
});

await check('a proof for GET: 401 invalid_dpop_proof', { token }, async () => {
  expectBadProof(await mcpPost(MCP_URL, initializeRequest(5), { headers: dpopHeaders(token, key, { htm: 'GET' }) }), 'htm GET');
});

await check('a proof for another URL: 401 invalid_dpop_proof', { token }, async () => {
  const r = await mcpPost(MCP_URL, initializeRequest(6), { headers: dpopHeaders(token, key, { htu: `${origin}/other` }) });
  expectBadProof(r, 'htu of another URL');
});

await check('a proof made 5 minutes ago: 401 invalid_dpop_proof', { token }, async () => {
  const iat = Math.floor(Date.now() / 1000) - 300;
  expectBadProof(await mcpPost(MCP_URL, initializeRequest(7), { headers: dpopHeaders(token, key, { claims: { iat } }) }), 'an old iat');
});

await check('a proof bound to another token (ath): 401 invalid_dpop_proof', { token }, async () => {
  const r = await mcpPost(MCP_URL, initializeRequest(8), { headers: dpopHeaders(token, key, { accessToken: `${token}x` }) });
  expectBadProof(r, 'the ath of another token');
});

await check('a proof by another key: 401 (invalid_token or invalid_dpop_proof)', { token }, async () => {
  const r = await mcpPost(MCP_URL, initializeRequest(9), { headers: dpopHeaders(token, other) });
  assert(r.status === 401, `expected 401, got ${shown(r)}`);
  const errors = challenges(r.headers.get('www-authenticate')).map((c) => c.params.error);
  assert(errors.includes('invalid_token') || errors.includes('invalid_dpop_proof'), `no invalid_token / invalid_dpop_proof: ${r.headers.get('www-authenticate')}`);
  note(`WWW-Authenticate: ${r.headers.get('www-authenticate')}`);
});

await check('a proof with the token\'s key but another\'s signature: 401 invalid_dpop_proof', { token }, async () => {
  const r = await mcpPost(MCP_URL, initializeRequest(10), { headers: dpopHeaders(token, key, { signer: other }) });
  expectBadProof(r, 'a forged proof signature');
});

// ---- the binding, both ways; bearer tokens ------------------------------------------------------------

await check('the bound token as Bearer: 401 invalid_token', { token }, async () => {
  const r = await mcpPost(MCP_URL, initializeRequest(11), { headers: { authorization: `Bearer ${token}` } });
  expect401(r, 'bearer', 'invalid_token', 'a DPoP-bound token as Bearer');
  note(`WWW-Authenticate: ${r.headers.get('www-authenticate')}`);
});

const bearer = await check('a bearer token (no proof at the token endpoint): token_type Bearer, no cnf', { asMeta }, async () => {
  const body = await requestToken(asMeta.token_endpoint, { resource: MCP_URL, scope: SCOPE });
  assert(/^bearer$/i.test(body.token_type), `token_type ${body.token_type}`);
  assert(decodeJwt(body.access_token).payload.cnf === undefined, `cnf ${JSON.stringify(decodeJwt(body.access_token).payload.cnf)}`);
  return body.access_token;
});

await check('the bearer token with the DPoP scheme and a good proof: 401 invalid_token', { bearer }, async () => {
  const r = await mcpPost(MCP_URL, initializeRequest(12), { headers: dpopHeaders(bearer, key) });
  assert(r.status === 401, `expected 401, got ${shown(r)}`);
  const errors = challenges(r.headers.get('www-authenticate')).map((c) => c.params.error);
  assert(errors.includes('invalid_token'), `no invalid_token: ${r.headers.get('www-authenticate')}`);
  note(`WWW-Authenticate: ${r.headers.get('www-authenticate')}`);
});

await check('the bearer token as Bearer: initialize 200', { bearer }, async () => {
  const r = await mcpPost(MCP_URL, initializeRequest(13), { headers: { authorization: `Bearer ${bearer}` } });
  assert(r.status === 200 && r.headers.get('mcp-session-id'), `expected 200 and a session, got ${shown(r)}`);
});

// ---- step-up with a bound token -----------------------------------------------------------------------

const challenged = await check('whoami with the bound token: 403 insufficient_scope (both challenges)', { token, session }, async () => {
  const r = await mcpPost(MCP_URL, whoamiCall(14), { headers: dpopHeaders(token, key), session });
  assert(r.status === 403, `expected 403, got ${shown(r)}`);
  const header = r.headers.get('www-authenticate');
  const all = challenges(header);
  assert(all.length === 2 && all.every((c) => c.params.error === 'insufficient_scope'), `expected Bearer and DPoP insufficient_scope challenges: ${header}`);
  const scope = challenge(r, 'dpop').params.scope ?? '';
  assert(scope.split(' ')[0] === 'mcp:whoami' && scope.split(' ').includes(SCOPE), `DPoP scope "${scope}" (${header})`);
  assert(r.message?.error?.code === -32023, `body is no JSON-RPC error -32023: ${r.text.slice(0, 200)}`);
  note(`WWW-Authenticate: ${header}`);
  return scope;
});

await check('step-up: a bound token with the challenge\'s scopes: whoami 200', { challenged, session }, async () => {
  const wide = await boundToken(key, challenged);
  const r = await mcpPost(MCP_URL, whoamiCall(15), { headers: dpopHeaders(wide, key), session });
  assert(r.status === 200, `expected 200, got ${shown(r)}`);
  const who = JSON.parse(resultText(r));
  assert(who.roles?.includes('mcp:whoami') && who.identity === CLIENT_ID, `whoami ${JSON.stringify(who)}`);
  note(`whoami: ${JSON.stringify(who)}`);
});

// ---- the other algorithms ---------------------------------------------------------------------------------

for (const alg of ALGS.filter((a) => a !== 'ES256')) {
  await check(`alg ${alg}: a token bound to a ${alg} key, its proof: initialize 200`, { asMeta }, async () => {
    const k = dpopKey(alg);
    const t = await boundToken(k);
    const r = await mcpPost(MCP_URL, initializeRequest(16), { headers: dpopHeaders(t, k) });
    assert(r.status === 200 && r.headers.get('mcp-session-id'), `expected 200 and a session, got ${shown(r)}`);
  });
}

if (!flag('--no-sdk')) {
  await sdkChecks({
    url: MCP_URL,
    issuer: ISSUER,
    clientId: CLIENT_ID,
    tokenCheck: (t) => assert(decodeJwt(t).payload.aud === MCP_URL && !decodeJwt(t).payload.cnf, `the SDK's token is not a bearer token for ${MCP_URL}`),
  });
}

finish('oidc-dpop');

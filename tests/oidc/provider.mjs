// A real OAuth 2.1 / OpenID authorization server for the interop check: panva's oidc-provider
// (pinned in package.json), on loopback over plain http (a development setup; nothing here is a
// production configuration).
//
// Usage: node provider.mjs [PORT] [--openid-configuration-only]      (PORT default 0: any free)
//
// Binds 127.0.0.1:PORT first, then builds the provider with the issuer http://127.0.0.1:<bound
// port> (no trailing slash) and prints one line to stdout once it serves:
//   oidc-provider ready at http://127.0.0.1:PORT
// Runs until killed (SIGTERM/SIGINT close the listener and exit 0).
//
// Configuration:
//   clients    `mcp-check` / `mcp-check-secret`, confidential (client_secret_basic), grant_types
//              ["client_credentials"] only; `mcp-check-rs` (same secret), alike but its tokens
//              are RS256-signed instead of ES256; `mcp-check-opaque` (same secret), alike but
//              its access tokens are opaque (see resources); and `mcp-rs` / `mcp-rs-secret`,
//              the resource server itself, which gets no tokens and is the one client allowed
//              to introspect (it may introspect every client's tokens);
//   keys       an ES256 (P-256) and an RS256 (2048-bit) signing key, made at start, both
//              published at jwks_uri with their kid;
//   resources  the resourceIndicators feature (RFC 8707): a token request must name one
//              `resource`; allowed are any `http://127.0.0.1:<port>/mcp` and
//              `https://127.0.0.1:<port>/mcp` (the MCP servers under test, whose ports the
//              harness picks later) and `http://127.0.0.1:1/other` (a resource of someone
//              else, for the wrong-audience checks). Each yields a JWT access token (RFC 9068:
//              typ at+jwt) with aud = that resource, or for `mcp-check-opaque` an opaque one
//              (its aud, scope, exp and cnf kept by the provider, told by introspection); 300 s
//              lifetime, and the scopes asked for that are among `mcp:tools mcp:whoami`
//              (others are dropped, as oidc-provider does; asking for only others, e.g.
//              `openid`, yields a token without scope); asking for none gets `mcp:tools`.
//              Anything else: invalid_target.
//   DPoP       (RFC 9449; on by default in oidc-provider 9) a token request carrying a `DPoP`
//              proof gets a token bound to the proof's key (token_type DPoP, cnf.jkt);
//              proofs may be ES256, EdDSA, RS256 or PS256 (the algorithms the resource server
//              under test takes), and must carry the provider's nonce (RFC 9449 §8: the first
//              proof is answered 400 use_dpop_nonce with a DPoP-Nonce header to retry with).
//              Token requests without a proof are not affected.
//   introspection  (RFC 7662) at the metadata's introspection_endpoint, for `mcp-rs` only
//              (client_secret_basic); oidc-provider answers 400 unsupported_token_type for a
//              JWT (it introspects only its opaque tokens).
// The provider serves its metadata at both /.well-known/oauth-authorization-server (RFC 8414)
// and /.well-known/openid-configuration; with --openid-configuration-only the former answers
// 404, as at an OpenID provider without RFC 8414 metadata (clients and resource servers must
// then fall back to OpenID Connect Discovery).
//
// Logs each request (method, path, status) to stderr; OIDC_DEBUG=1 adds each grant's outcome.
// (The harness counts the introspection requests in that log to see the resource server's
// cache at work.)

import * as crypto from 'node:crypto';
import * as http from 'node:http';

import Provider, { errors } from 'oidc-provider';

const argv = process.argv.slice(2);
const openidOnly = argv.includes('--openid-configuration-only');
const port = Number(argv.find((a) => !a.startsWith('--')) ?? 0);
const debug = process.env.OIDC_DEBUG === '1';

const CLIENT_ID = 'mcp-check';
const CLIENT_ID_RS = 'mcp-check-rs';
const CLIENT_ID_OPAQUE = 'mcp-check-opaque';
const CLIENT_SECRET = 'mcp-check-secret';
// The resource server, as the client of the introspection endpoint.
const RS_CLIENT_ID = 'mcp-rs';
const RS_CLIENT_SECRET = 'mcp-rs-secret';
// The DPoP proof algorithms accepted: those the resource server under test takes.
const DPOP_ALGS = ['ES256', 'EdDSA', 'RS256', 'PS256'];
// The scopes a token for a resource may carry (of those asked for), and what a request that asks
// for none gets.
const RESOURCE_SCOPES = 'mcp:tools mcp:whoami';
const DEFAULT_SCOPE = 'mcp:tools';
const OTHER_RESOURCE = 'http://127.0.0.1:1/other';
const MCP_RESOURCE = /^https?:\/\/127\.0\.0\.1:[1-9][0-9]{0,4}\/mcp$/;

function signingKey(type, options, alg, kid) {
  const { privateKey } = crypto.generateKeyPairSync(type, options);
  return { ...privateKey.export({ format: 'jwk' }), alg, use: 'sig', kid };
}

// Bind first, so the issuer names the port actually bound (no pick-then-bind race).
const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [
    ...[CLIENT_ID, CLIENT_ID_RS, CLIENT_ID_OPAQUE].map((client_id) => ({
      client_id,
      client_secret: CLIENT_SECRET,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    })),
    {
      client_id: RS_CLIENT_ID,
      client_secret: RS_CLIENT_SECRET,
      grant_types: [],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  jwks: {
    keys: [
      signingKey('ec', { namedCurve: 'P-256' }, 'ES256', 'es256-1'),
      signingKey('rsa', { modulusLength: 2048 }, 'RS256', 'rs256-1'),
    ],
  },
  // Only signals; the resource servers' scopes come from getResourceServerInfo.
  scopes: ['openid'],
  cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
  enabledJWA: { dPoPSigningAlgValues: DPOP_ALGS },
  features: {
    devInteractions: { enabled: false }, // no interactive logins: client_credentials only
    clientCredentials: { enabled: true },
    dPoP: {
      enabled: true,
      nonceSecret: crypto.randomBytes(32),
      requireNonce: () => true,
    },
    introspection: {
      enabled: true,
      // Only the resource server learns what a token is (replaces the default, which lets any
      // confidential client introspect any token).
      allowedPolicy: (ctx, client) => client.clientId === RS_CLIENT_ID,
    },
    revocation: { enabled: false },
    resourceIndicators: {
      enabled: true,
      // No resource requested: none (the token would then be no JWT for anyone; the harness
      // always names one).
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, resourceIndicator, client) {
        if (resourceIndicator !== OTHER_RESOURCE && !MCP_RESOURCE.test(resourceIndicator)) {
          throw new errors.InvalidTarget(`resource ${resourceIndicator} is not served here`);
        }
        // The client_credentials grant issues the asked-for scopes that are also the resource's
        // (`scope` below); a request naming none would get a token without any, so it is given
        // the default here (this runs before the grant reads the requested scopes).
        if (ctx.oidc.params && !ctx.oidc.params.scope) ctx.oidc.params.scope = DEFAULT_SCOPE;
        const info = { scope: RESOURCE_SCOPES, audience: resourceIndicator, accessTokenTTL: 300 };
        if (client.clientId === CLIENT_ID_OPAQUE) return { ...info, accessTokenFormat: 'opaque' };
        return {
          ...info,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: client.clientId === CLIENT_ID_RS ? 'RS256' : 'ES256' } },
        };
      },
    },
  },
  ttl: {
    ClientCredentials: 300,
  },
  // Error pages (which no flow here shows) as JSON, without the default's "customize" notice.
  renderError(ctx, out) {
    ctx.type = 'json';
    ctx.body = out;
  },
});

// An access log on stderr: which discovery documents the resource servers read, and when.
provider.use(async (ctx, next) => {
  await next();
  console.error(`oidc-provider: ${new Date().toISOString()} ${ctx.method} ${ctx.path} -> ${ctx.status}`);
});

if (openidOnly) {
  provider.use(async (ctx, next) => {
    if (ctx.path === '/.well-known/oauth-authorization-server') {
      ctx.status = 404;
      ctx.body = { error: 'not_found' };
      return;
    }
    await next();
  });
}

provider.on('server_error', (ctx, err) => {
  console.error(`oidc-provider: server_error on ${ctx.method} ${ctx.path}:`, err);
});
if (debug) {
  provider.on('grant.success', (ctx) => console.error(`oidc-provider: token issued to ${ctx.oidc.client?.clientId}`));
  provider.on('grant.error', (ctx, err) => console.error(`oidc-provider: grant error: ${err.message} (${err.error_description ?? ''})`));
}

server.on('request', provider.callback());
console.log(`oidc-provider ready at ${issuer}${openidOnly ? ' (openid-configuration only)' : ''}`);

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close();
    server.closeAllConnections();
    process.exit(0);
  });
}

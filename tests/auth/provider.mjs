// The real authorization server of the auth tests: oidc-provider (npm, pinned in package.json and
// package-lock.json), configured as an OAuth 2.1 server for one MCP resource.
//
//   node provider.mjs CONFIG.json      (prints "listening <issuer>" on stdout once it accepts)
//
// CONFIG.json: {"port": N, "resource": "http://127.0.0.1:M/mcp", "scopes": ["arbor:read", ...],
//               "jwks": {"keys": [<private RSA JWK with kid>]}, "access_ttl": seconds, "format": "jwt"|"opaque"}
// The signing key comes from the test, so the test can also mint tokens with it that the server
// would never issue (wrong issuer, wrong audience, expired) and check Plexor refuses them.
// Features used: dynamic client registration (RFC 7591), authorization code with PKCE (S256 only),
// resource indicators (RFC 8707) with JWT access tokens (RFC 9068) bound to the resource, refresh
// tokens, and the library's development login/consent pages (a headless user agent submits them).
import fs from 'node:fs';

import Provider from 'oidc-provider';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const issuer = `http://127.0.0.1:${config.port}`;
const resourceScope = config.scopes.join(' ');

const provider = new Provider(issuer, {
  jwks: config.jwks,
  cookies: { keys: ['plexor-auth-tests'] },
  scopes: ['openid', 'offline_access', ...config.scopes],
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => config.resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== config.resource) {
          throw new Provider.errors.InvalidTarget(`unknown resource ${indicator}`);
        }
        return {
          scope: resourceScope,
          audience: config.resource,
          accessTokenTTL: config.access_ttl,
          accessTokenFormat: config.format || 'jwt',  // "opaque": checked by introspection (RFC 7662)
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  pkce: { required: () => true },
  // Every client allowed the refresh_token grant gets a refresh token (no offline_access needed).
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  clientDefaults: { grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'none' },
});
provider.proxy = false;
// Policy of this server: a registered client may later ask for any scope of the resource. The SDK
// registers with the scopes of the first challenge and steps up from there, and oidc-provider would
// otherwise hold it to the `scope` it registered with. So `scope` is dropped from registrations.
provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && ctx.path === '/reg' && ctx.is('application/json')) {
    const chunks = [];
    for await (const chunk of ctx.req) chunks.push(chunk);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    delete body.scope;
    ctx.req.body = body;
  }
  await next();
});
// Why a request was refused, in the server's log (the tests print it when a flow fails).
for (const event of ['grant.error', 'authorization.error', 'registration_create.error', 'server_error']) {
  provider.on(event, (ctx, err) => process.stderr.write(`${event}: ${err.error || err.name}: ${err.error_detail || err.error_description || err.message}\n`));
}

const server = provider.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`listening ${issuer}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}

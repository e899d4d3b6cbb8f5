// An independent OpenID Connect provider for the console's sign-on tests (tests/reviewconsole/
// test_sso_browser.py): npm's oidc-provider, pinned in package-lock.json beside this file and
// installed by scripts/ensure_oidc_provider.sh. It is a stand-in for a company's provider, never
// a part of the console.
//
// Environment: CONSOLE_URL (the console under test, for its redirect URIs), CLIENT_ID,
// CLIENT_SECRET, ACCOUNTS_FILE (JSON: {"login": {"groups": [...], "email": ..., ...}}, read
// again at every sign-in so a test changes a person's groups between two logins).
// Prints one JSON line {"issuer": ...} once it listens on 127.0.0.1 (PORT, else a free port).
import { readFileSync } from 'node:fs';
import http from 'node:http';

import Provider from 'oidc-provider';

const consoleUrl = process.env.CONSOLE_URL.replace(/\/$/, '');
const clientId = process.env.CLIENT_ID;
const accountsFile = process.env.ACCOUNTS_FILE;

function account(login) {
  const all = JSON.parse(readFileSync(accountsFile, 'utf8'));
  return all[login];
}

const configuration = {
  clients: [
    {
      client_id: clientId,
      client_secret: process.env.CLIENT_SECRET,
      redirect_uris: [`${consoleUrl}/accounts/sso/callback/`],
      post_logout_redirect_uris: [`${consoleUrl}/accounts/login/`],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  // Every authorization request must carry a PKCE challenge (S256), confidential client or not.
  pkce: { required: () => true },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name', 'given_name', 'family_name'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  // A login names an account of ACCOUNTS_FILE (any password: the provider's development
  // interactions); an unknown login is refused there.
  async findAccount(ctx, id) {
    if (!account(id)) return undefined;
    return {
      accountId: id,
      async claims() {
        const { groups = [], ...profile } = account(id) ?? {};
        return { sub: id, preferred_username: id, groups, ...profile };
      },
    };
  },
  // The console is a first-party client: consent is given without a page.
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  ttl: { IdToken: 300, AccessToken: 300, AuthorizationCode: 60, Session: 3600, Grant: 3600, Interaction: 600 },
};

const server = http.createServer();
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, configuration);
  // A development interaction's password is not checked; an unknown login is refused.
  server.on('request', provider.callback());
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}

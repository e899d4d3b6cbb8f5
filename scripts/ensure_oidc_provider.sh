#!/usr/bin/env bash
# Makes sure the independent OpenID Connect provider of the sign-on tests (tests/oidc: npm's
# oidc-provider, pinned by tests/oidc/package-lock.json) is installed: Debian's Node.js and npm,
# then `npm ci` from the lock file whenever the installed tree is not the locked one.
set -euo pipefail
cd "$(dirname "$0")/../tests/oidc"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "node and npm are not installed. Install Debian's packages as root:" >&2
    echo "    sudo apt-get install -y nodejs npm" >&2
    echo "Without them the sign-on browser tests are skipped (and fail when CI is set)." >&2
    exit 1
  fi
  echo "Installing Debian's nodejs and npm..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# npm ci writes node_modules/.package-lock.json; a lock file newer than it wants a new install.
if [ ! -d node_modules/oidc-provider ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "Installing tests/oidc (npm ci)..."
  npm ci --no-audit --no-fund --loglevel=error
fi
echo "oidc-provider: $(node -p 'require("./node_modules/oidc-provider/package.json").version') (node $(node --version))"

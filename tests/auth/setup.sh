#!/usr/bin/env bash
# Install the authorization server of the auth tests: oidc-provider from npm, at the version pinned
# in tests/auth/package.json and package-lock.json (npm ci: exactly the locked tree).
#
#   bash tests/auth/setup.sh        # install if missing; silent when already installed
#
# Where: $PLEXOR_AUTH_CACHE (default: <repo>/.cache/oidc-provider; .cache/ ignores itself in git).
# Then:  the tests run `node $CACHE/provider.mjs CONFIG` (provider.mjs is copied there each run).
# Exit:  0 installed (or already there); 3 cannot install here (no node/npm), said on stderr;
#        anything else is a failed install. Needs the npm registry only for the first install.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${PLEXOR_AUTH_CACHE:-$(cd "$HERE/../.." && pwd)/.cache/oidc-provider}"
# shellcheck source=tests/npm-pinned.sh
. "$HERE/../npm-pinned.sh"
npm_pinned auth oidc-provider "$HERE" "$CACHE" || exit $?

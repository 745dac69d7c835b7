#!/usr/bin/env bash
# Install the official MCP Bundle CLI, npm @anthropic-ai/mcpb, at the version pinned in
# tests/bundle/package.json and package-lock.json (npm ci: exactly the locked tree), for tests/bundle.
#
#   bash tests/bundle/setup.sh        # install if missing; silent when already installed
#
# Where: $PLEXOR_MCPB_CACHE (default: <repo>/.cache/mcpb; .cache/ ignores itself in git).
# Then:  the tests run `node $CACHE/node_modules/@anthropic-ai/mcpb/dist/cli/cli.js validate|info|unpack ...`.
# Exit:  0 installed (or already there); 3 cannot install here (no node/npm), said on stderr;
#        anything else is a failed install. Needs the npm registry only for the first install.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${PLEXOR_MCPB_CACHE:-$(cd "$HERE/../.." && pwd)/.cache/mcpb}"
# shellcheck source=tests/npm-pinned.sh
. "$HERE/../npm-pinned.sh"
npm_pinned bundle @anthropic-ai/mcpb "$HERE" "$CACHE" || exit $?

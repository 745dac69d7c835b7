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
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${PLEXOR_MCPB_CACHE:-$REPO/.cache/mcpb}"

say() { echo "bundle setup: $*" >&2; }

current() {
  [ -f "$CACHE/node_modules/@anthropic-ai/mcpb/package.json" ] && cmp -s "$HERE/package-lock.json" "$CACHE/package-lock.json"
}

current && exit 0
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  say "node and npm are needed to install @anthropic-ai/mcpb into $CACHE"
  exit 3
fi
mkdir -p "$CACHE"
if [ "$CACHE" = "$REPO/.cache/mcpb" ] && [ ! -f "$REPO/.cache/.gitignore" ]; then
  printf '*\n' > "$REPO/.cache/.gitignore"
fi
if command -v flock >/dev/null 2>&1; then  # one installer at a time; the others wait, then find it done
  exec 9>"$CACHE/.lock"
  flock 9
  current && exit 0
fi
cp "$HERE/package.json" "$HERE/package-lock.json" "$CACHE/"
(cd "$CACHE" && npm ci --no-audit --no-fund --loglevel=error >&2)
say "installed @anthropic-ai/mcpb $(node -p "require('$CACHE/node_modules/@anthropic-ai/mcpb/package.json').version") into $CACHE"

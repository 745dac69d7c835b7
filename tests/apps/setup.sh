#!/usr/bin/env bash
# Install what the MCP Apps browser tests (tests/apps) drive: the npm packages pinned in
# apps/package.json and apps/package-lock.json (npm ci: exactly the locked tree, into
# apps/node_modules, which git ignores) and Debian's Chromium (/usr/bin/chromium).
#
#   bash tests/apps/setup.sh        # install if missing; silent when already installed
#
# Exit: 0 installed (or already there); 3 cannot install here (no node/npm, or no Chromium and no
#       apt-get as root), said on stderr; anything else is a failed install. Needs the npm registry
#       and Debian's archive only for the first install.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
APPS="$(cd "$HERE/../../apps" && pwd)"
CHROMIUM="${PLEXOR_CHROMIUM:-/usr/bin/chromium}"

say() { echo "apps setup: $*" >&2; }

modules_current() {
  [ -f "$APPS/node_modules/playwright-core/package.json" ] \
    && cmp -s "$APPS/package-lock.json" "$APPS/node_modules/.package-lock.json.installed"
}

if [ ! -x "$CHROMIUM" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's chromium"
    apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2
  else
    say "no Chromium at $CHROMIUM: install Debian's chromium (apt-get install chromium) or set PLEXOR_CHROMIUM"
    exit 3
  fi
fi
modules_current && exit 0
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  say "node and npm are needed to install the pinned packages into $APPS/node_modules"
  exit 3
fi
if command -v flock >/dev/null 2>&1; then  # one installer at a time; the others wait, then find it done
  exec 9>"$APPS/.install.lock"
  flock 9
  modules_current && exit 0
fi
(cd "$APPS" && npm ci --no-audit --no-fund --loglevel=error >&2)
cp "$APPS/package-lock.json" "$APPS/node_modules/.package-lock.json.installed"
say "installed $(cd "$APPS" && node -p "Object.entries(require('./package.json').dependencies).map(e => e.join('@')).join(' ')")"

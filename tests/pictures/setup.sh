#!/usr/bin/env bash
# Install the renderer of docs/pictures/*.dot: @viz-js/viz (Graphviz compiled to WebAssembly) from npm,
# at the version pinned in tests/pictures/package.json and package-lock.json (npm ci: exactly the locked tree).
#
#   bash tests/pictures/setup.sh        # install if missing; silent when already installed
#
# Where: $PLEXOR_PICTURES_CACHE (default: <repo>/.cache/pictures; .cache/ ignores itself in git).
# Then:  `node $CACHE/render.mjs < in.dot > out.svg` renders (render.mjs is copied there each run);
#        tests/test_pictures.py and tests/pictures/render.sh use it.
# Exit:  0 installed (or already there); 3 cannot install here (no node/npm), said on stderr;
#        anything else is a failed install. Needs the npm registry only for the first install.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${PLEXOR_PICTURES_CACHE:-$REPO/.cache/pictures}"

say() { echo "pictures setup: $*" >&2; }

current() {
  [ -f "$CACHE/node_modules/@viz-js/viz/package.json" ] && cmp -s "$HERE/package-lock.json" "$CACHE/package-lock.json"
}

if ! current; then
  if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    say "node and npm are needed to install @viz-js/viz into $CACHE"
    exit 3
  fi
  mkdir -p "$CACHE"
  if [ "$CACHE" = "$REPO/.cache/pictures" ] && [ ! -f "$REPO/.cache/.gitignore" ]; then
    printf '*\n' > "$REPO/.cache/.gitignore"
  fi
  if command -v flock >/dev/null 2>&1; then  # one installer at a time; the others wait, then find it done
    exec 9>"$CACHE/.lock"
    flock 9
  fi
  if ! current; then
    cp "$HERE/package.json" "$HERE/package-lock.json" "$CACHE/"
    (cd "$CACHE" && npm ci --no-audit --no-fund --loglevel=error >&2)
    say "installed @viz-js/viz $(node -p "require('$CACHE/node_modules/@viz-js/viz/package.json').version") into $CACHE"
  fi
fi
cp "$HERE/render.mjs" "$CACHE/render.mjs"

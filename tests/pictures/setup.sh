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
CACHE="${PLEXOR_PICTURES_CACHE:-$(cd "$HERE/../.." && pwd)/.cache/pictures}"
# shellcheck source=tests/npm-pinned.sh
. "$HERE/../npm-pinned.sh"
npm_pinned pictures @viz-js/viz "$HERE" "$CACHE" || exit $?
cp "$HERE/render.mjs" "$CACHE/render.mjs"

#!/usr/bin/env bash
# Re-render every docs/pictures/*.dot to its .svg with the pinned renderer (installs it first: setup.sh).
#
#   bash tests/pictures/render.sh
#
# Commit the .svg with its .dot: tests/test_pictures.py fails when they disagree.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CACHE="${PLEXOR_PICTURES_CACHE:-$REPO/.cache/pictures}"
bash "$HERE/setup.sh"
for dot in "$REPO"/docs/pictures/*.dot; do
  node "$CACHE/render.mjs" < "$dot" > "${dot%.dot}.svg"
  echo "rendered ${dot%.dot}.svg" >&2
done

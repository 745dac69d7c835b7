# Sourced by the setup scripts of tests that need an npm package at a pinned version
# (tests/auth, tests/bundle, tests/pictures): one way to install a locked tree into a cache folder.
#
#   npm_pinned LABEL PACKAGE HERE CACHE
#
# installs $HERE/package.json + package-lock.json into $CACHE with `npm ci` (exactly the locked tree)
# unless $CACHE already holds PACKAGE from the same lock; one installer at a time (flock), the others
# wait and then find it done. Returns 0 when installed (or already there), 3 when it cannot install
# here (no node/npm, said on stderr), 1 when the install failed. Needs the npm registry only once.
# A cache under <repo>/.cache gets a .gitignore there, so git ignores the folder.

npm_pinned() {
  local label=$1 package=$2 here=$3 cache=$4
  local repo
  repo="$(cd "$here/../.." && pwd)"
  _npm_pinned_current() {
    [ -f "$cache/node_modules/$package/package.json" ] && cmp -s "$here/package-lock.json" "$cache/package-lock.json"
  }
  _npm_pinned_current && return 0
  if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "$label setup: node and npm are needed to install $package into $cache" >&2
    return 3
  fi
  mkdir -p "$cache" || return 1
  if [ "$(dirname "$cache")" = "$repo/.cache" ] && [ ! -f "$repo/.cache/.gitignore" ]; then
    printf '*\n' > "$repo/.cache/.gitignore"
  fi
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/.lock"
    flock 9
    _npm_pinned_current && return 0
  fi
  cp "$here/package.json" "$here/package-lock.json" "$cache/" || return 1
  (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error >&2) || return 1
  echo "$label setup: installed $package $(node -p "require('$cache/node_modules/$package/package.json').version")" \
    "into $cache" >&2
}

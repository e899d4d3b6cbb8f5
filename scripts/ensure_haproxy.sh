#!/usr/bin/env bash
# Makes sure Debian's HAProxy is installed, for the multi-instance recipe (scripts/cluster.py) and
# the scale-out test (tests/scaleout). It is the load balancer in front of the web instances.
set -euo pipefail

if command -v haproxy >/dev/null 2>&1; then
  echo "haproxy: $(command -v haproxy)"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "haproxy is not installed. Install Debian's package as root:" >&2
  echo "    sudo apt-get install -y haproxy" >&2
  echo "Without it the scale-out test is skipped (and fails when CI is set)." >&2
  exit 1
fi

echo "Installing Debian's haproxy..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends haproxy >/dev/null
echo "haproxy: $(command -v haproxy)"

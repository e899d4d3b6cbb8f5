#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed for the real-browser tests (tests/browser).
# Playwright drives the system browser; it never downloads a browser build of its own.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  echo "chromium: $(command -v chromium)"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "chromium is not installed. Install Debian's package as root:" >&2
  echo "    sudo apt-get install -y chromium fonts-noto-cjk" >&2
  echo "Without it the browser tests are skipped (and fail when CI is set)." >&2
  exit 1
fi

echo "Installing Debian's chromium (and CJK fonts for the Chinese pages)..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-noto-cjk >/dev/null
echo "chromium: $(command -v chromium)"

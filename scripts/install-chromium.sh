#!/usr/bin/env bash
# Installs what the console's browser test (host/admin/console, TestConsoleE2E) drives:
# Debian's chromium, run headless by chromedp. Idempotent; as root on Debian only: anywhere
# else it says why it does nothing, and the test then skips naming the missing browser
# (outside CI; in CI, CI=true, it fails).
# Usage: bash scripts/install-chromium.sh   (scripts/test.sh calls it)
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
	echo "install-chromium: $(command -v chromium) is installed"
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "install-chromium: not root on Debian; no chromium installed (set WQHOST_CHROMIUM to a browser to use)"
	exit 0
fi
echo "install-chromium: apt-get install chromium"
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null ||
	{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null; }
command -v chromium

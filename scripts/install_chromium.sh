#!/usr/bin/env bash
# Debian's headless Chromium + chromedriver for the explorer's browser test (tests/e2e/test_dashboard_browser.py).
# Idempotent: does nothing when both are installed; skips (test then skips) where apt or root is missing.
set -euo pipefail
if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "install_chromium: no apt-get here; install chromium + chromedriver yourself (browser test skips)" >&2
    exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then SUDO="sudo"; else
        echo "install_chromium: not root and no sudo; browser test skips" >&2
        exit 0
    fi
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null

#!/usr/bin/env bash
# Install Debian's chromium for the browser test of `farm report` (tests/e2e/test_report_browser.py) when
# /usr/bin/chromium is missing. Idempotent and quiet: does nothing when it is there; never downloads a browser
# through playwright. Where it cannot install (no apt-get, no root, no network), it says so on stderr and exits 0:
# the browser test then skips, naming why.
set -uo pipefail
CHROMIUM=/usr/bin/chromium
[ -x "$CHROMIUM" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-browser: no apt-get here; install chromium at $CHROMIUM by hand (the browser test will skip)" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    echo "ensure-browser: not root and no password-less sudo; cannot install chromium (the browser test will skip)" >&2
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends chromium; } >/dev/null 2>&1; then
  echo "ensure-browser: apt-get could not install chromium (the browser test will skip)" >&2
fi
exit 0

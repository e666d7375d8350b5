#!/usr/bin/env bash
# Debian's Chromium for the web view's browser test (tests/integration/test_webview.py), which
# Playwright drives through /usr/bin/chromium: `playwright install` downloads a browser and fails
# on machines without that download.  Installs chromium and chromium-driver with apt when they
# are missing and this machine can (apt-get, and root or password-less sudo).  Never fails:
# what stays missing is named here, and the test skips with the same reason.  Used by
# `make test` (and so by .ci/run).
set -u
packages=()
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || packages+=(chromium)
command -v chromedriver >/dev/null 2>&1 || [ -x /usr/bin/chromedriver ] || packages+=(chromium-driver)
[ ${#packages[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "note: ${packages[*]} missing and no apt-get here; the web view's browser test will skip" >&2
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
    SUDO="sudo -n"
else
    echo "note: ${packages[*]} missing; installing needs root (sudo apt-get install ${packages[*]}); the web view's browser test will skip" >&2
    exit 0
fi
echo "installing ${packages[*]} with apt-get (for the web view's browser test)" >&2
if ! { $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${packages[@]}"; } >/dev/null 2>&1; then
    echo "note: apt-get install ${packages[*]} failed; the web view's browser test will skip" >&2
fi
[ -x /usr/bin/chromium ] || echo "note: chromium is still missing; the web view's browser test will skip" >&2
exit 0

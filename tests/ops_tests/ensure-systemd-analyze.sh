#!/bin/sh
# `make test-tools`: systemd-analyze for tests/ops_tests/test_systemd.py (`make test`
# itself never installs system packages; without it that test skips and says why).
# Debian's `systemd` package provides it, and it works without systemd running.
# Installed only when missing, only as root with apt-get; anywhere else this says
# why, and that test skips with the same reason (never a silent pass).
set -u
if command -v systemd-analyze >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "test-tools: systemd-analyze is missing and apt-get (as root) is not available;" \
        "tests/ops_tests/test_systemd.py will be skipped" >&2
    exit 0
fi
echo "test-tools: installing Debian's systemd package for systemd-analyze" >&2
export DEBIAN_FRONTEND=noninteractive
if apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends systemd >/dev/null; then
    exit 0
fi
echo "test-tools: apt-get could not install systemd; tests/ops_tests/test_systemd.py will be skipped" >&2
exit 0

#!/bin/sh
# `make test-tools`: the system tools some tests use (`make test` itself never installs
# system packages; without a tool its tests skip and say why, never a silent pass):
# - systemd-analyze (Debian's `systemd` package; works without systemd running) for
#   tests/ops_tests/test_systemd.py;
# - libfaketime (Debian's `libfaketime`) for the clock-step tests on real processes,
#   tests/crash/test_lifecycle_processes.py.
# Installed only when missing, only as root with apt-get; anywhere else this says why.
set -u
need=""
command -v systemd-analyze >/dev/null 2>&1 || need="$need systemd"
found_faketime=""
for d in /usr/lib/x86_64-linux-gnu/faketime /usr/lib/aarch64-linux-gnu/faketime /usr/lib/faketime; do
    [ -e "$d/libfaketime.so.1" ] && found_faketime=1
done
[ -n "$found_faketime" ] || need="$need libfaketime"
if [ -z "$need" ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "test-tools: missing Debian packages:$need, and apt-get (as root) is not available;" \
        "their tests will be skipped" >&2
    exit 0
fi
echo "test-tools: installing Debian packages:$need" >&2
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086  # $need is a list of package names
if apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends $need >/dev/null; then
    exit 0
fi
echo "test-tools: apt-get could not install$need; their tests will be skipped" >&2
exit 0

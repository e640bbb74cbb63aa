#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# setup.sh — the README's first command on a fresh machine: finds what the build needs
# (scripts/deps/build.txt), installs what is missing with apt-get (as root, or through sudo), then
# builds (`make`, arguments passed on). Where it cannot install, it stops at once naming the
# packages and the one command that installs them. Runs under any POSIX sh; needs nothing else.
# `./setup.sh --deps LIST...` only installs (`make test` installs scripts/deps/test.txt so).
# Non-goals: package managers other than apt (it names what to install there), CUDA (the build
# takes nvcc when it finds one).
set -eu
cd "$(dirname "$0")"

# ---- what is missing, and installing it ----
have() {
    case "$1" in
    cmd:*) command -v "${1#cmd:}" > /dev/null 2>&1 ;;
    pc:*) command -v pkg-config > /dev/null 2>&1 && pkg-config --exists "${1#pc:}" ;;
    cc) command -v cc > /dev/null 2>&1 && printf 'int main(void) { return 0; }\n' |
            cc -x c -o /dev/null - > /dev/null 2>&1 ;;
    fuzz) command -v clang > /dev/null 2>&1 &&
            printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' |
            clang -fsanitize=fuzzer,address,undefined -x c -o /dev/null - > /dev/null 2>&1 ;;
    *) echo "setup.sh: unknown check '$1' in $list" >&2; exit 1 ;;
    esac
}

# install_missing LIST: the packages of LIST whose check fails, through apt-get
install_missing() {
    list=$1
    missing=""
    while read -r pkg check; do
        case "$pkg" in '' | '#'*) continue ;; esac
        have "$check" || missing="$missing $pkg"
    done < "$list"
    [ -n "$missing" ] || return 0
    cmd="apt-get update && apt-get install -y --no-install-recommends$missing"
    if ! command -v apt-get > /dev/null 2>&1; then
        echo "setup.sh: missing:$missing (Debian/Ubuntu package names); install them with your package manager, then run ./setup.sh again" >&2
        exit 1
    fi
    if [ "$(id -u)" = 0 ]; then
        sudo=""
    elif command -v sudo > /dev/null 2>&1; then
        sudo="sudo"
    else
        echo "setup.sh: missing:$missing; as root, run: $cmd" >&2
        exit 1
    fi
    echo "setup.sh: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends $missing > /dev/null; }; then
        echo "setup.sh: installing failed; as root, run: $cmd" >&2
        exit 1
    fi
}

if [ "${1:-}" = --deps ]; then   # ./setup.sh --deps LIST...: install only (make test: the test tools)
    shift
    for l in "$@"; do install_missing "$l"; done
    exit 0
fi
install_missing scripts/deps/build.txt

# ---- build ----
exec make "$@"

#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# tests/guile/run.sh — run a Guile test of the (sonicboom) binding:
#   sh run.sh SRC_DIR LIBSONICBOOM SANITIZER_RUNTIME SCRIPT ARGS...
# Finds guile 3.0 (exit 77 = SKIP, with the reason, only when it is not installed: CI installs it
# from scripts/deps/test.txt), points the binding at the library just built, and runs SCRIPT with
# ARGS from the repository root; SB_GUILE names the guile found, for the script's own subprocesses.
# SANITIZER_RUNTIME is "-" or the ASan runtime that a sanitizer build's library needs preloaded
# into guile (which is not built with it); the script runs sb and abi_probe without it.
set -u
src=$1 lib=$2 asan=$3
shift 3
guile=$(command -v guile-3.0 || command -v guile) || {
    echo "SKIP: guile is not installed (apt-get install guile-3.0; listed in scripts/deps/test.txt)"
    exit 77
}
case $("$guile" -c '(display (major-version))') in
    3) ;;
    *) echo "SKIP: $guile is not Guile 3 (apt-get install guile-3.0)"; exit 77 ;;
esac
# the module is compiled (as a user's guile does) into the build tree, not into ~/.cache
export GUILE_SONICBOOM_LIB="$lib" SB_GUILE="$guile" XDG_CACHE_HOME="$(dirname "$lib")/guile-cache"
if [ "$asan" != - ]; then
    # guile's own memory is the collector's: leak reports would be about it, not about the library
    export LD_PRELOAD="$asan" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
cd "$src" && exec "$guile" -L "$src/bindings/guile" "$@"

# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# tests/cli_lib.sh — what every CLI test script shares; sourced first, as
#   . "$(dirname "$0")/../cli_lib.sh"
# by a script run as `sh script.sh <sb binary> <shared data dir>`. Sets sb and data from those
# arguments, a scratch folder $tmp removed on exit, and the counters behind ok / bad "what failed";
# expect_rc WANT "label" cmd... runs cmd (output discarded) and counts whether it exited WANT;
# finish prints the "N passed, N failed" line CI reads and sets the script's status.
set -u
sb=$1
data=$2
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

expect_rc() {
    want=$1 label=$2
    shift 2
    "$@" > /dev/null 2>&1; rc=$?
    [ $rc = "$want" ] && ok || bad "$label: rc=$rc"
}

finish() {
    echo "$pass passed, $fail failed"
    [ $fail = 0 ]
}

#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# install_examples.sh BUILD_DIR SOURCE_DIR CC [FLAGS] — install BUILD_DIR into a temporary prefix, then
# build examples/ against that installed copy twice (pkg-config; CMake find_package) and run them;
# run the installed sb, which must find its installed model. Nothing outside the temp dir changes.
# FLAGS: compile and link flags the library was built with that a program using it needs too (the
# sanitizer build's -fsanitize=...).
set -eu
build=$1 src=$2 cc=$3 extra=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }
p=$tmp/prefix
pcdir=$(dirname "$(find "$p" -name sonicboom.pc | head -1)")
[ -f "$pcdir/sonicboom.pc" ] || fail "no sonicboom.pc installed"
lib=$(find "$p" -name 'libsonicboom.so.0' | head -1)
[ -n "$lib" ] || fail "no libsonicboom.so.0 installed"
[ -f "$p/include/sonicboom.h" ] || fail "no include/sonicboom.h installed"
model=$(find "$p/share/sonicboom" -name '*.gguf' | head -1)
[ -n "$model" ] || fail "no embedded model under share/sonicboom"
echo "installed: $lib, $pcdir/sonicboom.pc, $model"

# ---- move the install: both the .pc file and the CMake package must be relocatable ----
mv "$p" "$tmp/moved"
p=$tmp/moved
pcdir=$(dirname "$(find "$p" -name sonicboom.pc | head -1)")
libdir=$(dirname "$(find "$p" -name 'libsonicboom.so.0' | head -1)")
model=$(find "$p/share/sonicboom" -name '*.gguf' | head -1)

# ---- pkg-config ----
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs sonicboom) || fail "pkg-config --cflags --libs sonicboom"
echo "pkg-config: $flags"
for ex in generate tokenize; do
    # shellcheck disable=SC2086
    "$cc" -std=c11 -Wall -Wextra -Werror $extra -o "$tmp/pc_$ex" "$src/examples/$ex.c" $flags -Wl,-rpath,"$libdir" ||
        fail "building examples/$ex.c through pkg-config"
done
"$tmp/pc_tokenize" "$model" "In the beginning God created the heaven" > "$tmp/tok.out" || fail "tokenize (pkg-config build)"
[ "$(wc -l < "$tmp/tok.out")" -gt 3 ] || fail "tokenize printed $(wc -l < "$tmp/tok.out") lines"
"$tmp/pc_generate" "$model" "In the beginning" 12 > "$tmp/gen_pc.out" || fail "generate (pkg-config build)"
[ "$(wc -c < "$tmp/gen_pc.out")" -gt 20 ] || fail "generate printed too little: $(cat "$tmp/gen_pc.out")"

# ---- CMake find_package ----
cmake -S "$src/examples" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$p" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_RPATH="$libdir" \
    -DCMAKE_C_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" \
    > "$tmp/cm.log" 2>&1 || { cat "$tmp/cm.log"; fail "configuring examples/ with find_package(SonicBoom)"; }
cmake --build "$tmp/cm" > "$tmp/cmb.log" 2>&1 || { cat "$tmp/cmb.log"; fail "building examples/ through CMake"; }
"$tmp/cm/generate" "$model" "In the beginning" 12 > "$tmp/gen_cm.out" || fail "generate (CMake build)"
cmp -s "$tmp/gen_pc.out" "$tmp/gen_cm.out" || fail "the two builds of generate printed different text"
"$tmp/cm/tokenize" "$model" "and the earth was without form" > /dev/null || fail "tokenize (CMake build)"

# ---- the installed sb finds its own model (no -m) ----
SB_MODEL="" "$p/bin/sb" run -p "In the beginning" -n 8 --temp 0 > "$tmp/sb.out" 2> "$tmp/sb.err" ||
    { cat "$tmp/sb.err"; fail "the installed sb run"; }
grep -q . "$tmp/sb.out" || fail "the installed sb printed nothing"
echo "ok: installed copy built via pkg-config and CMake, examples ran, installed sb ran"

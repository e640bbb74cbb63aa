#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# bench/sass.sh — what a CUDA source's kernels cost in instructions, without a GPU: the SASS of
# every kernel in SRC for sm_90, and for each kernel whose name matches REGEX its instruction
# count, the instructions of its largest loop (the K loop of a GEMM: a static count, both sides
# of every branch), that loop's MMAs and its commonest opcodes, and ptxas's spill bytes.
#
# Usage: bench/sass.sh BUILD_DIR SRC.cu [REGEX]     e.g. bench/sass.sh build-cu src/backend/cuda/k_mma.cu 'ILi12ELi15E'
#
# The CUDA 13 toolkit here has no cuobjdump / nvdisasm, and the 11.8 ones read no CUDA 13 cubin.
# So: nvcc 13 writes PTX (the build's flags and includes, from BUILD_DIR), its .version is set
# to 7.8, and Debian's nvidia-cuda-toolkit 11.8 (non-free; fetched once into $SB_SASS_CACHE, by
# default ~/.cache/sb-sass, and unpacked there, never installed) assembles and disassembles it.
# ptxas 11.8 is not the driver's or nvcc 13's assembler: the counts are a proxy for comparing two
# versions of a kernel, not the machine code that runs. Measured speed is the judge (bench/NOTES.md).
set -eu
[ $# -ge 2 ] || { echo "usage: bench/sass.sh BUILD_DIR SRC.cu [REGEX]" >&2; exit 2; }
B=$1 SRC=$(realpath "$2") RE=${3:-.}
C=${SB_SASS_CACHE:-$HOME/.cache/sb-sass}
DEB=nvidia-cuda-toolkit_11.8.89~11.8.0-5~deb12u1_amd64.deb
T=$C/x/usr/bin
if [ ! -x "$T/cuobjdump" ]; then
    mkdir -p "$C"
    curl -fsSL -o "$C/$DEB" "http://deb.debian.org/debian/pool/non-free/n/nvidia-cuda-toolkit/$DEB"
    dpkg-deb -x "$C/$DEB" "$C/x"
fi
RSP=$B/CMakeFiles/sb_backend_cuda.dir/includes_CUDA.rsp
[ -f "$RSP" ] || { echo "sass.sh: no $RSP (configure BUILD_DIR with CUDA first)" >&2; exit 1; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
(cd "$B" && nvcc -DSB_HAVE_CUDA=1 --options-file CMakeFiles/sb_backend_cuda.dir/includes_CUDA.rsp -O3 -DNDEBUG -arch=sm_90 \
    -ptx -o "$W/k.ptx" "$SRC")
sed -i 's/^\.version .*/.version 7.8/' "$W/k.ptx"
"$T/ptxas" -arch=sm_90 -O3 -v -o "$W/k.cubin" "$W/k.ptx" > "$W/v.txt" 2>&1
"$T/cuobjdump" -sass "$W/k.cubin" > "$W/k.sass"
python3 - "$W/k.sass" "$W/v.txt" "$RE" <<'EOF'
import re, sys
sass, vlog, pat = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
spill, name = {}, None
for l in vlog.splitlines():
    m = re.search(r"Function properties for (\S+)", l)
    if m: name = m.group(1)
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", l)
    if m and name: spill[name] = f"{m.group(1)}/{m.group(2)}"
print(f"{'kernel':64s} {'total':>6s} {'loop':>5s} {'mma':>4s} {'spill st/ld':>11s}  loop's commonest opcodes")
for f in re.split(r"\n\s+Function : ", sass)[1:]:
    name = f.split("\n", 1)[0].strip()
    if not re.search(pat, name): continue
    ins = [l for l in f.split("\n") if re.match(r"\s+/\*[0-9a-f]{4}\*/", l)]
    addr = [int(re.match(r"\s+/\*([0-9a-f]{4})\*/", l).group(1), 16) for l in ins]
    back = []
    for l, a in zip(ins, addr):
        m = re.search(r"BRA (0x[0-9a-f]+)", l)
        if m and int(m.group(1), 16) < a: back.append((int(m.group(1), 16), a))
    lo, hi = max(back, key=lambda x: x[1] - x[0]) if back else (1, 0)
    ops = {}
    for l, a in zip(ins, addr):
        if lo <= a <= hi:
            w = l.split(";")[0].split("*/", 1)[1].split()
            op = (w[1] if w[0].startswith("@") else w[0]).split(".")[0]
            ops[op] = ops.get(op, 0) + 1
    top = " ".join(f"{k}:{v}" for k, v in sorted(ops.items(), key=lambda x: -x[1])[:8])
    mma = sum(v for k, v in ops.items() if k in ("IMMA", "HMMA"))
    print(f"{name[:64]:64s} {len(ins):6d} {sum(ops.values()):5d} {mma:4d} {spill.get(name, '?'):>11s}  {top}")
EOF

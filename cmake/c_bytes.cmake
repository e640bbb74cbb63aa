# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# cmake/c_bytes.cmake — included by the cmake -P scripts that compile files into C arrays
# (cmake/embed_web.cmake, src/codegen/embed.cmake): sb_c_bytes(FILE BYTES SIZE) sets BYTES to the
# file's bytes as a C initializer list "0x..,0x..,...,0x00" (a NUL the size leaves out) and SIZE to
# its length in bytes.
function(sb_c_bytes file bytes_var size_var)
  file(READ ${file} hex HEX)
  string(LENGTH "${hex}" n)
  math(EXPR size "${n} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  set(${bytes_var} "${bytes}0x00" PARENT_SCOPE)
  set(${size_var} ${size} PARENT_SCOPE)
endfunction()

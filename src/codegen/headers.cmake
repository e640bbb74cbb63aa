# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# codegen/headers.cmake — included by the top-level CMakeLists.txt after sb_layer(codegen ...):
# generates cg_headers.c (embed.cmake) from the device headers the generated kernels include and
# the NVRTC shims, rebuilt whenever one of them changes, and adds it to sb_codegen.
# every device header (a new #include among them needs no edit here), quant/blocks.h, the shims
file(GLOB SB_CG_DEVICE RELATIVE ${CMAKE_SOURCE_DIR}/src CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/device/*.cuh)
set(SB_CG_NAMES "")
foreach(h ${SB_CG_DEVICE})
  list(APPEND SB_CG_NAMES "${h}=${h}")
endforeach()
list(APPEND SB_CG_NAMES
  "quant/blocks.h=quant/blocks.h"
  "stdint.h=codegen/shim/stdint.h"
  "stddef.h=codegen/shim/stddef.h"
  "cuda_fp16.h=codegen/shim/cuda_fp16.h")
set(SB_CG_DEPS "")
foreach(pair ${SB_CG_NAMES})
  string(REPLACE "=" ";" kv ${pair})
  list(GET kv 1 rel)
  list(APPEND SB_CG_DEPS ${CMAKE_SOURCE_DIR}/src/${rel})
endforeach()
set(SB_CG_OUT ${CMAKE_BINARY_DIR}/codegen/cg_headers.c)
string(REPLACE ";" "," SB_CG_NAMES_ARG "${SB_CG_NAMES}")
add_custom_command(OUTPUT ${SB_CG_OUT}
  COMMAND ${CMAKE_COMMAND} -DOUT=${SB_CG_OUT} -DSRC=${CMAKE_SOURCE_DIR}/src "-DNAMES=${SB_CG_NAMES_ARG}"
          -P ${CMAKE_SOURCE_DIR}/src/codegen/embed.cmake
  DEPENDS ${SB_CG_DEPS} ${CMAKE_SOURCE_DIR}/src/codegen/embed.cmake
  COMMENT "codegen: embedding device headers for NVRTC" VERBATIM)
target_sources(sb_codegen PRIVATE ${SB_CG_OUT})

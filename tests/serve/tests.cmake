# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb serve` (docs/serve.md) driven over HTTP by Python stdlib scripts on the embedded model: each
# script starts its own server on a free port and prints the "N passed, N failed" line.
foreach(t api errors queue flags logprobs)
  add_test(NAME serve/${t} COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/serve/test_${t}.py $<TARGET_FILE:sb> ${SB_TESTDATA})
  set_tests_properties(serve/${t} PROPERTIES LABELS serve TIMEOUT 300)
endforeach()

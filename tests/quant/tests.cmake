# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# Quant layer: one conformance ctest per type against the shared llama.cpp vectors (the no-argument
# quant/test_conformance runs all of them at once). Exit code 77 = shared data absent (SKIP).
foreach(t f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs)
  add_test(NAME quant/conformance_${t} COMMAND quant_test_conformance ${t} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(quant/conformance_${t} PROPERTIES
    ENVIRONMENT "SB_TESTDATA=${SB_TESTDATA}" LABELS quant SKIP_RETURN_CODE 77)
endforeach()
set_tests_properties(quant/test_conformance PROPERTIES SKIP_RETURN_CODE 77)

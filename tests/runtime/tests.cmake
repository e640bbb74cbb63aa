# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# Runtime layer extras. test_quantize / test_synth exit 77 (SKIP) when the shared reference models
# are absent (their self-contained parts still ran and passed).
set_tests_properties(runtime/test_quantize runtime/test_synth PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME runtime/cli_quantize_synth COMMAND sh ${CMAKE_SOURCE_DIR}/tests/runtime/cli_quantize_synth.sh $<TARGET_FILE:sb> ${SB_TESTDATA})
set_tests_properties(runtime/cli_quantize_synth PROPERTIES LABELS runtime)
add_test(NAME runtime/cli_quantize_flags COMMAND sh ${CMAKE_SOURCE_DIR}/tests/runtime/cli_quantize_flags.sh $<TARGET_FILE:sb> ${SB_TESTDATA})
set_tests_properties(runtime/cli_quantize_flags PROPERTIES LABELS runtime)
add_test(NAME runtime/cli_quantize_imatrix COMMAND sh ${CMAKE_SOURCE_DIR}/tests/runtime/cli_quantize_imatrix.sh $<TARGET_FILE:sb> ${SB_TESTDATA})
set_tests_properties(runtime/cli_quantize_imatrix PROPERTIES LABELS runtime)
# test_cuda_unpack_emu exits 77 (SKIP) without a host C++ compiler to build the device code for the CPU.
set_tests_properties(runtime/test_cuda_unpack_emu PROPERTIES SKIP_RETURN_CODE 77)
set_tests_properties(runtime/test_cuda_mmh_emu PROPERTIES SKIP_RETURN_CODE 77)
set_tests_properties(runtime/test_cuda_mma_emu PROPERTIES SKIP_RETURN_CODE 77)
set_tests_properties(runtime/test_cuda_gemv_emu PROPERTIES SKIP_RETURN_CODE 77)
set_tests_properties(runtime/test_cuda_attn_paged_emu PROPERTIES SKIP_RETURN_CODE 77)
set_tests_properties(runtime/test_cuda_fattn_mma_emu PROPERTIES SKIP_RETURN_CODE 77)
set_tests_properties(runtime/test_cuda_ew_quant_emu PROPERTIES SKIP_RETURN_CODE 77)
set_tests_properties(runtime/test_model_validate PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME runtime/cli_model_validate COMMAND sh ${CMAKE_SOURCE_DIR}/tests/runtime/cli_model_validate.sh $<TARGET_FILE:sb> ${SB_TESTDATA})
add_test(NAME runtime/cli_synth_presets COMMAND sh ${CMAKE_SOURCE_DIR}/tests/runtime/cli_model_validate.sh $<TARGET_FILE:sb> ${SB_TESTDATA} presets)
set_tests_properties(runtime/cli_model_validate PROPERTIES LABELS runtime)
set_tests_properties(runtime/cli_synth_presets PROPERTIES LABELS "runtime;slow")
# A model truncated while mapped (SIGBUS → one fatal line) and --no-mmap surviving it; exit 77 = SKIP.
add_test(NAME runtime/cli_truncate_model COMMAND sh ${CMAKE_SOURCE_DIR}/tests/runtime/cli_truncate_model.sh $<TARGET_FILE:sb> ${SB_TESTDATA})
set_tests_properties(runtime/cli_truncate_model PROPERTIES LABELS runtime SKIP_RETURN_CODE 77)
add_test(NAME runtime/cli_quantize_llama_identity COMMAND sh ${CMAKE_SOURCE_DIR}/tests/runtime/cli_quantize_llama_identity.sh $<TARGET_FILE:sb> ${SB_TESTDATA})
set_tests_properties(runtime/cli_quantize_llama_identity PROPERTIES LABELS runtime)
set_tests_properties(runtime/test_gemma4 PROPERTIES SKIP_RETURN_CODE 77)

# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# Codegen tests. codegen/test_codegen: the layer alone (NVRTC compiles, caches; exit 77 = SKIP when
# NVRTC cannot be loaded, CI has it). codegen/test_codegen_no_nvrtc: the same binary with NVRTC
# made unloadable. codegen/test_codegen_models: every fused group of every test model's decode and
# prefill plan for the CUDA target, compiled with NVRTC for sm_90 and sm_80 (links the runtime for
# the model builders and the CUDA plan target).
sb_layer_tests(codegen)
set_tests_properties(codegen/test_codegen codegen/test_codegen_emu PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME codegen/test_codegen_no_nvrtc COMMAND codegen_test_codegen --no-nvrtc WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(codegen/test_codegen_no_nvrtc PROPERTIES ENVIRONMENT "SB_NVRTC_LIB=/nonexistent/libnvrtc.so" LABELS codegen)

if(SB_HAVE_CUDA) # the CUDA plan target exists only there
  get_property(sb_rt_root GLOBAL PROPERTY SB_LAYER_INC_runtime)
  add_executable(codegen_test_codegen_models ${CMAKE_CURRENT_SOURCE_DIR}/codegen/codegen_models.c)
  target_include_directories(codegen_test_codegen_models PRIVATE ${sb_rt_root} ${CMAKE_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(codegen_test_codegen_models PRIVATE ${SB_WARN})
  target_link_libraries(codegen_test_codegen_models PRIVATE sb_runtime)
  add_test(NAME codegen/test_codegen_models COMMAND codegen_test_codegen_models WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(codegen/test_codegen_models PROPERTIES ENVIRONMENT "SB_TESTDATA=${SB_TESTDATA}" LABELS codegen SKIP_RETURN_CODE 77)
endif()

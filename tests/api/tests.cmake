# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# Script-level tests of the products: exported symbols, include layering, CLI exit statuses.
add_test(NAME api/exports_only_sb COMMAND sh ${CMAKE_SOURCE_DIR}/tests/api/check_exports.sh $<TARGET_FILE:sonicboom>)
add_test(NAME api/layering COMMAND sh ${CMAKE_SOURCE_DIR}/tests/api/check_layering.sh ${CMAKE_SOURCE_DIR})
add_test(NAME api/cli_info COMMAND sh ${CMAKE_SOURCE_DIR}/tests/api/cli_info.sh $<TARGET_FILE:sb> ${SB_TESTDATA})
set_tests_properties(api/exports_only_sb api/layering api/cli_info PROPERTIES LABELS api)
if(SB_HAVE_CUDA)
  target_compile_definitions(api_test_backend PRIVATE SB_HAVE_CUDA=1)
endif()
add_test(NAME api/cli_version COMMAND $<TARGET_FILE:sb> version)
add_test(NAME api/cli_tokenize COMMAND sh ${CMAKE_SOURCE_DIR}/tests/api/cli_tokenize.sh $<TARGET_FILE:sb> ${SB_TESTDATA})
set_tests_properties(api/cli_tokenize PROPERTIES LABELS api)
add_test(NAME api/cli_device COMMAND sh ${CMAKE_SOURCE_DIR}/tests/api/cli_device.sh $<TARGET_FILE:sb> ${SB_TESTDATA})
set_tests_properties(api/cli_device PROPERTIES LABELS api)
# Hostile input, I/O side (docs/runtime.md "Files"): outputs never destroy what is at the path,
# inputs are checked before they are read, stdout write errors, usage errors; exit 77 = SKIP.
foreach(t cli_io_outputs cli_io_inputs cli_io_stdout cli_io_args)
  add_test(NAME api/${t} COMMAND sh ${CMAKE_SOURCE_DIR}/tests/api/${t}.sh $<TARGET_FILE:sb> ${SB_TESTDATA})
  set_tests_properties(api/${t} PROPERTIES LABELS api SKIP_RETURN_CODE 77)
endforeach()

# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# The Guile binding (bindings/guile/sonicboom.scm) against the library just built: struct layouts
# against the C compiler's (abi_probe), greedy generation against `sb run`, tokenizer vectors,
# chat rendering against sb_chat_render called from C, errors, cancelling. run.sh skips (77) only
# when guile is not installed.
add_executable(guile_abi_probe ${CMAKE_CURRENT_SOURCE_DIR}/guile/abi_probe.c)
target_compile_options(guile_abi_probe PRIVATE ${SB_WARN})
target_link_libraries(guile_abi_probe PRIVATE sonicboom)
# a library of another version, which the module must refuse
add_library(guile_fake_sonicboom SHARED ${CMAKE_CURRENT_SOURCE_DIR}/guile/fake_version.c)
target_compile_options(guile_fake_sonicboom PRIVATE ${SB_WARN})
set(SB_GUILE_ASAN -)
if(SONICBOOM_SANITIZE)
  # the sanitized library needs the ASan runtime loaded first into the (unsanitized) guile
  foreach(rt libclang_rt.asan-x86_64.so libasan.so)
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=${rt} OUTPUT_VARIABLE p OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(EXISTS "${p}" AND SB_GUILE_ASAN STREQUAL "-")
      set(SB_GUILE_ASAN ${p})
    endif()
  endforeach()
endif()
add_test(NAME guile/binding COMMAND sh ${CMAKE_SOURCE_DIR}/tests/guile/run.sh ${CMAKE_SOURCE_DIR}
         $<TARGET_FILE:sonicboom> ${SB_GUILE_ASAN} tests/guile/test_sonicboom.scm
         $<TARGET_FILE:sb> $<TARGET_FILE:guile_abi_probe> $<TARGET_FILE:guile_fake_sonicboom>
         ${SB_TESTDATA} ${SB_EMBEDDED_MODEL})
set_tests_properties(guile/binding PROPERTIES LABELS guile SKIP_RETURN_CODE 77 TIMEOUT 600)
# (sonicboom tensor), (sonicboom graph), (sonicboom llama): eager ops, tracing, dead values, the
# Scheme llama decoder against the C builder's logits and speed, two guarded graphs of an early exit
add_test(NAME guile/tensor COMMAND sh ${CMAKE_SOURCE_DIR}/tests/guile/run.sh ${CMAKE_SOURCE_DIR}
         $<TARGET_FILE:sonicboom> ${SB_GUILE_ASAN} tests/guile/test_tensor.scm ${SB_TESTDATA})
set_tests_properties(guile/tensor PROPERTIES LABELS guile SKIP_RETURN_CODE 77 TIMEOUT 600)
# examples/guile/chat.scm with input piped in, against `sb chat`
add_test(NAME guile/chat COMMAND sh ${CMAKE_SOURCE_DIR}/tests/guile/chat.sh ${CMAKE_SOURCE_DIR} $<TARGET_FILE:sonicboom>
         ${SB_GUILE_ASAN} $<TARGET_FILE:sb> ${SB_EMBEDDED_MODEL})
set_tests_properties(guile/chat PROPERTIES LABELS guile SKIP_RETURN_CODE 77 TIMEOUT 300)
# the traced Scheme decoder's prefill and decode plans against the C builder's (bench/plan_diff.py)
add_test(NAME guile/same_plan COMMAND sh ${CMAKE_SOURCE_DIR}/tests/guile/same_plan.sh ${CMAKE_SOURCE_DIR}
         $<TARGET_FILE:sonicboom> ${SB_GUILE_ASAN} ${SB_TESTDATA})
set_tests_properties(guile/same_plan PROPERTIES LABELS guile SKIP_RETURN_CODE 77 TIMEOUT 300)
# the Scheme llama decoder traced for CUDA against the C builder's CUDA session (CUDA builds; SKIP
# where no GPU is usable)
if(SB_HAVE_CUDA)
  add_test(NAME guile/cuda COMMAND sh ${CMAKE_SOURCE_DIR}/tests/guile/run.sh ${CMAKE_SOURCE_DIR}
           $<TARGET_FILE:sonicboom> ${SB_GUILE_ASAN} tests/guile/test_cuda.scm ${SB_TESTDATA})
  set_tests_properties(guile/cuda PROPERTIES LABELS "guile;cuda" SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

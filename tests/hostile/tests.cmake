# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# The hostile-input suite (tests/hostile/README.md): run.py drives sb and hostile_abi (a small
# program over the C ABI) through the case tables in cases/ and the mutated model files of
# mutate.py. hostile/fast runs in every build, the ASan one included; hostile/slow (label slow)
# holds the bigger parts, which `make test-asan` leaves out.
add_executable(hostile_abi ${CMAKE_CURRENT_SOURCE_DIR}/hostile/hostile_abi.c)
target_compile_options(hostile_abi PRIVATE ${SB_WARN})
target_link_libraries(hostile_abi PRIVATE sonicboom)
set(SB_HOSTILE_ARGS --sb $<TARGET_FILE:sb> --abi $<TARGET_FILE:hostile_abi> --data ${SB_TESTDATA} -j 2)
if(SONICBOOM_SANITIZE)
  list(APPEND SB_HOSTILE_ARGS --sanitized)
endif()
add_test(NAME hostile/fast COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/hostile/run.py ${SB_HOSTILE_ARGS} --tier fast)
add_test(NAME hostile/slow COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/hostile/run.py ${SB_HOSTILE_ARGS} --tier slow)
set_tests_properties(hostile/fast PROPERTIES LABELS "hostile" TIMEOUT 900 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(hostile/slow PROPERTIES LABELS "hostile;slow" TIMEOUT 900 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})

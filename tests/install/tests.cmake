# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# The installed copy works like a real C library: install the build into a temporary prefix, build
# examples/ against it through pkg-config and through CMake's find_package, run them, and run the
# installed sb with its installed embedded model.
# a sanitizer build's library needs its runtime in the programs that link it
set(SB_INSTALL_TEST_FLAGS "")
if(SONICBOOM_SANITIZE)
  set(SB_INSTALL_TEST_FLAGS "-fsanitize=address,undefined")
endif()
add_test(NAME install/examples COMMAND sh ${CMAKE_SOURCE_DIR}/tests/install/install_examples.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} ${CMAKE_C_COMPILER} "${SB_INSTALL_TEST_FLAGS}")
set_tests_properties(install/examples PROPERTIES LABELS install)
# the same programs built in-tree (examples/ is part of the build)
add_test(NAME install/examples_in_tree COMMAND sh -c "$<TARGET_FILE:example_tokenize> \"$1\" 'In the beginning God created' && $<TARGET_FILE:example_generate> \"$1\" 'In the beginning' 8" _ ${SB_EMBEDDED_MODEL})
set_tests_properties(install/examples_in_tree PROPERTIES LABELS install)

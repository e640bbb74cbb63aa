# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb serve` (docs/serve.md) driven over HTTP by Python stdlib scripts on the embedded model: each
# script starts its own server on a free port and prints the "N passed, N failed" line.
foreach(t api errors queue flags logprobs nginx load)
  add_test(NAME serve/${t} COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/serve/test_${t}.py $<TARGET_FILE:sb> ${SB_TESTDATA})
  set_tests_properties(serve/${t} PROPERTIES LABELS serve TIMEOUT 300)
endforeach()
# the load test: 64 streaming clients for 60 s (~70 s); not in the ASan suite (-LE slow)
set_tests_properties(serve/load PROPERTIES LABELS "serve;slow")
# The Node tests (the official `openai` package as the client; the chat page in headless Chromium
# through puppeteer-core): the fixture installs the packages pinned by tests/serve/node into
# build/serve-node with `npm ci` (once per build directory).
add_test(NAME serve/node_setup COMMAND sh ${CMAKE_SOURCE_DIR}/tests/serve/node_setup.sh ${CMAKE_BINARY_DIR})
set_tests_properties(serve/node_setup PROPERTIES LABELS serve TIMEOUT 300 FIXTURES_SETUP serve_node)
foreach(t openai chat_page)
  add_test(NAME serve/${t} COMMAND node ${CMAKE_SOURCE_DIR}/tests/serve/test_${t}.mjs $<TARGET_FILE:sb> ${CMAKE_BINARY_DIR})
  set_tests_properties(serve/${t} PROPERTIES LABELS serve TIMEOUT 300 FIXTURES_REQUIRED serve_node)
endforeach()
# the page's script is what the browser test exercises (the server side is a static file): not in the ASan suite
set_tests_properties(serve/chat_page PROPERTIES LABELS "serve;slow")

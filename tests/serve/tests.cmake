# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# `sb serve` (docs/serve.md) driven over HTTP by Python stdlib scripts on the embedded model: each
# script starts its own server on a free port and prints the "N passed, N failed" line.
foreach(t api errors queue flags logprobs nginx load)
  add_test(NAME serve/${t} COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/serve/test_${t}.py $<TARGET_FILE:sb> ${SB_TESTDATA})
  set_tests_properties(serve/${t} PROPERTIES LABELS serve TIMEOUT 300)
endforeach()
# The load test (64 streaming clients for 60 s, ~70 s) and the nginx test run many generations: in
# the ASan suite's Debug build that is minutes, so they are left out of it (-LE slow); the server
# code they drive is the same that serve/api, errors, queue and logprobs check under ASan.
set_tests_properties(serve/load serve/nginx PROPERTIES LABELS "serve;slow")
# The Node tests (the official `openai` package as the client; the chat page in headless Chromium
# through puppeteer-core): the fixture installs the packages pinned by tests/serve/node into
# build/serve-node with `npm ci` (once per build directory).
add_test(NAME serve/node_setup COMMAND sh ${CMAKE_SOURCE_DIR}/tests/serve/node_setup.sh ${CMAKE_BINARY_DIR})
set_tests_properties(serve/node_setup PROPERTIES LABELS serve TIMEOUT 300 FIXTURES_SETUP serve_node)
foreach(t openai chat_page)
  add_test(NAME serve/${t} COMMAND node ${CMAKE_SOURCE_DIR}/tests/serve/test_${t}.mjs $<TARGET_FILE:sb> ${CMAKE_BINARY_DIR})
  set_tests_properties(serve/${t} PROPERTIES LABELS serve TIMEOUT 300 FIXTURES_REQUIRED serve_node)
endforeach()
# Protocol compatibility with an outside client and the page's script: release build only (-LE slow
# keeps them, and the npm install they need, out of the ASan suite).
set_tests_properties(serve/node_setup serve/openai serve/chat_page PROPERTIES LABELS "serve;slow")

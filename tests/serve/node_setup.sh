#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# tests/serve/node_setup.sh BUILD_DIR — the ctest fixture of the Node tests (test_openai.mjs,
# test_chat_page.mjs): checks node (>= 18) and npm, then installs the packages pinned by
# tests/serve/node/package-lock.json (the official `openai` client, `puppeteer-core`) with `npm ci`
# into BUILD_DIR/serve-node — never into the source tree. A second run with the same lock file
# reuses that install. A missing tool or a failed install is one "error:" line and exit 1.
set -u
here=$(cd "$(dirname "$0")" && pwd)
dir=$1/serve-node
need() {
    echo "error: $1 is missing: install Debian's $2 (listed in scripts/deps/test.txt; 'make test' installs it)"
    exit 1
}
command -v node > /dev/null 2>&1 || need node nodejs
command -v npm > /dev/null 2>&1 || need npm npm
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
    echo "error: node $(node --version) is too old: the tests need Node.js 18 or later"
    exit 1
fi
if [ -f "$dir/installed.lock" ] && cmp -s "$dir/installed.lock" "$here/node/package-lock.json" &&
   (cd "$dir" && node -e 'require("openai"); require("puppeteer-core")') > /dev/null 2>&1; then
    echo "serve-node: the pinned packages are installed already ($dir)"
    echo "1 passed, 0 failed"
    exit 0
fi
rm -rf "$dir" && mkdir -p "$dir" && cp "$here/node/package.json" "$here/node/package-lock.json" "$dir/" || exit 1
if ! (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error); then
    echo "error: 'npm ci' in $dir failed: the Node tests need npm's registry (registry.npmjs.org) once per build directory"
    exit 1
fi
if ! (cd "$dir" && node -e 'require("openai"); require("puppeteer-core")'); then
    echo "error: the packages installed in $dir do not load"
    exit 1
fi
cp "$here/node/package-lock.json" "$dir/installed.lock"
echo "serve-node: $(cd "$dir" && node -p 'require("./node_modules/openai/package.json").version') openai, $(cd "$dir" && node -p 'require("./node_modules/puppeteer-core/package.json").version') puppeteer-core in $dir"
echo "1 passed, 0 failed"

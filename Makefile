# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# Thin wrapper over CMake with memorable targets. Build trees: build/ (release), build-asan/,
# build-fuzz/. JOBS defaults to the number of cores.
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
FUZZ_SECONDS ?= 60
PREFIX ?= /usr/local

.PHONY: all build test test-asan fuzz fuzz-tokenize bench install clean run

# make: release build of libsonicboom.so and sb (CUDA backend too when nvcc is found)
all build:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	cmake --build build -j $(JOBS)

# make test: build, install the test tools that are missing (scripts/deps/test.txt), run ctest
test: build
	sh ./setup.sh --deps scripts/deps/test.txt
	cd build && ctest --output-on-failure -j $(JOBS)

# make test-asan: the whole suite built with AddressSanitizer + UndefinedBehaviorSanitizer (no CUDA)
test-asan:
	sh ./setup.sh --deps scripts/deps/test.txt
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSONICBOOM_SANITIZE=ON -DSONICBOOM_CUDA=OFF $(CMAKE_FLAGS) >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS) -LE slow

# make fuzz FUZZ_SECONDS=N: libFuzzer on the GGUF parser (clang), seeded with the shared files
fuzz:
	sh ./setup.sh --deps scripts/deps/ci.txt
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSONICBOOM_FUZZ=ON -DSONICBOOM_CUDA=OFF -DSONICBOOM_TESTS=OFF >/dev/null
	cmake --build build-fuzz -j $(JOBS) --target fuzz_gguf
	FUZZ_SECONDS=$(FUZZ_SECONDS) sh fuzz/run.sh build-fuzz/fuzz/fuzz_gguf

# make fuzz-tokenize FUZZ_SECONDS=N: libFuzzer on the tokenizers (shared qwen2 and llama-spm vocabularies)
fuzz-tokenize:
	sh ./setup.sh --deps scripts/deps/ci.txt
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSONICBOOM_FUZZ=ON -DSONICBOOM_CUDA=OFF -DSONICBOOM_TESTS=OFF >/dev/null
	cmake --build build-fuzz -j $(JOBS) --target fuzz_tokenize
	mkdir -p build-fuzz/corpus-tok && cd build-fuzz && SB_FUZZ_VOCABS=$(CURDIR)/../shared/testdata/vocab/ggml-vocab-qwen2.gguf:$(CURDIR)/../shared/testdata/vocab/ggml-vocab-llama-spm.gguf \
		./fuzz/fuzz_tokenize -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=2048 -timeout=5 corpus-tok

# make bench: kernel micro-benchmarks (GB/s vs the machine's measured bandwidth)
bench: build
	cmake --build build -j $(JOBS) --target benchmarks
	sh bench/run.sh build

# make install PREFIX=DIR: libsonicboom.so.0, sonicboom.h, sb, the embedded model, sonicboom.pc and the
# CMake package (find_package(SonicBoom)) under DIR (default /usr/local)
install: build
	cmake --install build --prefix $(PREFIX)

clean:
	rm -rf build build-asan build-fuzz

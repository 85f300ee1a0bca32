# Thin wrapper over CMake. Each goal installs the Debian packages it needs first.
JOBS ?= $(shell nproc)
# Tests mostly wait on real processes (coturn, the stand-in, kubectl): twice the cores keeps them busy.
TEST_JOBS ?= $(shell echo $$(( $$(nproc) * 2 )))
BUILD ?= build
ASAN_BUILD ?= build-asan
CMAKE_FLAGS ?=

.PHONY: all deps build build-asan test test-plain test-asan demo demo-operator bench fuzz clean

all: build

deps:
	@bash tools/dev/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DTF_WERROR=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

SANITIZER_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# The test command: warnings as errors, the build and the same suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer, all in one ctest run over both build trees
# ($(BUILD)/both includes them), so the resource locks that keep two suites off one address hold
# across the two, and the sanitized tests use the cores the others leave waiting on real
# processes. (The sanitizer options only reach instrumented binaries.) test-plain and test-asan
# run one tree each.
test: deps build build-asan
	@mkdir -p $(BUILD)/both
	@printf 'subdirs("%s")\nsubdirs("%s")\n' "$(abspath $(BUILD))" "$(abspath $(ASAN_BUILD))" > $(BUILD)/both/CTestTestfile.cmake
	$(SANITIZER_ENV) ctest --test-dir $(BUILD)/both --output-on-failure -j $(TEST_JOBS)

test-plain: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(TEST_JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DTF_WERROR=ON -DTF_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)

test-asan: build-asan
	$(SANITIZER_ENV) ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(TEST_JOBS)

# The demo runs `turnfleet up` on loopback: 3 relays, held allocations, scale to 2 with a drain, a browser
# call through each relay with credentials from turnfleet-issuer (headless Chromium), stop.
demo: build
	@bash tools/dev/demo.sh $(BUILD)

# turnfleet-operator on the local Kubernetes stand-in (root): a pool of three coturn relays proven,
# published, allocated through, scaled to two with a drain, a browser call through each relay with
# credentials from turnfleet-issuer (headless Chromium), deleted; nothing left running.
demo-operator: build
	/usr/bin/python3 tools/dev/demo-operator.py $(BUILD)

# Every libFuzzer target (clang, ASan + UBSan) for FUZZ_SECONDS each, one at a time.
FUZZ_SECONDS ?= 60
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) sh tools/dev/fuzz.sh

bench: build
	bench/plan $(BUILD)
	bench/probe $(BUILD)
	bench/parse $(BUILD)
	bench/webhook $(BUILD)
	bench/issuer $(BUILD)
	bench/up $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)

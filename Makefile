# Thin wrapper over CMake and ctest. The two commands: make run, make test.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
# How long make test fuzzes the inbound message path (seconds).
HUB_FUZZ_SECONDS ?= 60
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
# make run is the development setup: the dev /auth endpoint signs any
# private or presence subscription, so the demo page works out of the box.
# Everywhere else it stays off (the flag defaults to false).
RUN_ARGS   ?= --dev-auth-endpoint

.PHONY: all build run test test-unit test-e2e test-asan test-fuzz deps deps-test \
        clean image test-container bench-timers bench-scan bench-idle \
        bench-fanout soak

all: build

deps:
	deploy/install-deps.sh build

deps-test:
	deploy/install-deps.sh test

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

# Only builds; leaves the release binary at build/lubdub.
build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: deps build
	$(BUILD)/lubdub $(RUN_ARGS)

# Every test through ctest, then the unit tests once more under ASan+UBSan,
# then the libFuzzer target for HUB_FUZZ_SECONDS.
test: deps-test build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan
	$(MAKE) test-fuzz

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit -j $(JOBS)

# The browser tests alone (headless Chromium); screenshots land in
# tests/artifacts/.
test-e2e: deps-test build
	cd $(BUILD) && ctest --output-on-failure -L e2e

test-asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	    -DHUB_SANITIZE=address,undefined $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -L asan -j $(JOBS)

# Container image from deploy/Dockerfile (docs/OPERATIONS.md). Podman needs
# --format docker to keep the HEALTHCHECK.
IMAGE ?= lubdub
image:
	@if command -v podman >/dev/null 2>&1; then \
	    podman build --format docker -f deploy/Dockerfile -t $(IMAGE) .; \
	else \
	    docker build -f deploy/Dockerfile -t $(IMAGE) .; \
	fi

# Build and run the image with podman, as CI does (needs root).
test-container: build
	cd $(BUILD) && ctest --output-on-failure -L container

# The fuzz build needs clang (libFuzzer); only the fuzz target is built.
test-fuzz:
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	    -DHUB_FUZZ=ON -DHUB_FUZZ_SECONDS=$(HUB_FUZZ_SECONDS) $(CMAKE_ARGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_message
	cd $(FUZZ_BUILD) && ctest --output-on-failure -L fuzz

bench-timers: build
	$(BUILD)/bench/bench_timers

bench-scan: build
	$(BUILD)/bench/bench_scan

bench-idle: build
	LUBDUB_BINARY=$(BUILD)/lubdub IDLE_CLIENT=$(BUILD)/bench/idle_client \
	    bench/run_idle.sh

# Fan-out vs peers (bench/run_fanout.py). Ends with one "fanout: ..." line;
# tables go to bench/results/latest.md. Smoke run: FANOUT_ARGS=--quick
FANOUT_ARGS ?=
bench-fanout:
	$(MAKE) build
	BUILD=$(abspath $(BUILD)) python3 bench/run_fanout.py $(FANOUT_ARGS)

# Soak (tests/soak/soak.js, docs/RELIABILITY.md): every kind of load at
# once against the release binary for SOAK_SECONDS, a report line every
# SOAK_REPORT_SECONDS; fails on drifting RSS, leaked fds or timers, a
# session count the driver disagrees with, or a false 4201. Black-holed
# peers need root and `ip netns` (skipped with a note otherwise).
SOAK_SECONDS        ?= 1800
SOAK_REPORT_SECONDS ?= 60
soak: build
	@test -d tests/integration/node_modules || \
	    (cd tests/integration && npm ci --no-audit --no-fund)
	LUBDUB_BINARY=$(abspath $(BUILD))/lubdub SOAK_SECONDS=$(SOAK_SECONDS) \
	    SOAK_REPORT_SECONDS=$(SOAK_REPORT_SECONDS) node tests/soak/soak.js

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)

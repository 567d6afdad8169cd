# Thin wrapper over CMake and ctest. The two commands: make run, make test.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
# How long make test fuzzes, all targets together (seconds; split 3:2:1:2:1
# between the message path, the REST API, the config loader, the read
# bypass's framing and permessage-deflate).
HUB_FUZZ_SECONDS ?= 60
# make fuzz-long: seconds for each target, one after the other, one core.
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= message rest config wsread pmd
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
# make run is the development setup: the dev /auth endpoint signs any
# private or presence subscription, so the demo page works out of the box.
# Everywhere else it stays off (the flag defaults to false).
RUN_ARGS   ?= --dev-auth-endpoint

.PHONY: all build build-tests run run-cluster test test-unit test-e2e test-asan test-tsan test-fuzz \
        fuzz-build fuzz-long deps deps-test \
        clean image test-container bench-timers bench-scan bench-hash bench-idle \
        bench-fanout bench-webhooks bench-cluster bench-compression bench-recovery soak

all: build

deps:
	deploy/install-deps.sh build

deps-test:
	deploy/install-deps.sh test

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

# Only builds; leaves the release binary at build/lubdub. The tests are
# built too when their tools (cmocka, node) are installed, never required.
build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The release build with the tests required (after deps-test installed them).
build-tests:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DHUB_TESTS=ON $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

run: deps build
	$(BUILD)/lubdub $(RUN_ARGS)

# Three nodes on 127.0.0.1:6001-6003 sharing a local Redis (docs/SCALING.md);
# REDIS_PORT picks Redis's port (default 6390). Ctrl-C stops all of them.
run-cluster:
	deploy/install-deps.sh cluster
	$(MAKE) build
	tools/run-cluster.sh $(BUILD)/lubdub $(RUN_ARGS)

# Every test through ctest, then the unit tests once more under ASan+UBSan,
# then the multi-loop integration tests under ThreadSanitizer, then the
# libFuzzer targets for HUB_FUZZ_SECONDS.
test: deps-test build-tests
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan
	$(MAKE) test-tsan
	$(MAKE) test-fuzz

test-unit: build-tests
	cd $(BUILD) && ctest --output-on-failure -L unit -j $(JOBS)

# The browser tests alone (headless Chromium); screenshots land in
# tests/artifacts/.
test-e2e: deps-test build-tests
	cd $(BUILD) && ctest --output-on-failure -L e2e

test-asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DHUB_TESTS=ON \
	    -DHUB_SANITIZE=address,undefined $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -L asan -j $(JOBS)

# The integration tests that cross loops (ctest label tsan: --loops 2 or
# more) against a ThreadSanitizer binary; any report fails the test.
# Suppressions: tests/tsan.supp. tests/CMakeLists.txt sets
# TSAN_OPTIONS, the setarch -R wrapper and the wait scale.
test-tsan:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHUB_TESTS=ON \
	    -DHUB_SANITIZE=thread $(CMAKE_ARGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && ctest --output-on-failure -L tsan -j $(JOBS)

# Container image from deploy/Dockerfile (docs/OPERATIONS.md). Podman needs
# --format docker to keep the HEALTHCHECK. The image's build has no .git, so
# the commit it reports (lubdub --version) is passed in: this checkout's,
# with -dirty when tracked files differ from it (as hub/base/commit.cmake).
IMAGE ?= lubdub
COMMIT ?= $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) && \
	{ git diff --quiet HEAD -- 2>/dev/null && echo $$c || echo $$c-dirty; })
image:
	@if command -v podman >/dev/null 2>&1; then \
	    podman build --format docker --build-arg LUBDUB_COMMIT=$(COMMIT) \
	        -f deploy/Dockerfile -t $(IMAGE) .; \
	else \
	    docker build --build-arg LUBDUB_COMMIT=$(COMMIT) \
	        -f deploy/Dockerfile -t $(IMAGE) .; \
	fi

# Build and run the image with podman, as CI does (needs root).
test-container: build-tests
	cd $(BUILD) && ctest --output-on-failure -L container

# The fuzz build needs clang (libFuzzer); only the fuzz targets are built.
fuzz-build:
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	    -DHUB_TESTS=ON -DHUB_FUZZ=ON -DHUB_FUZZ_SECONDS=$(HUB_FUZZ_SECONDS) $(CMAKE_ARGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) \
	    $(foreach t,$(FUZZ_TARGETS),--target fuzz_$(t))

test-fuzz: fuzz-build
	cd $(FUZZ_BUILD) && ctest --output-on-failure -L fuzz

# Each target for FUZZ_SECONDS, in turn, on one core; stops at the first
# crash (the reproducer lands in $(FUZZ_BUILD)/crash-*). Add it to
# tests/fuzz/corpus/<target>/ once fixed.
fuzz-long: fuzz-build
	cd $(FUZZ_BUILD) && for t in $(FUZZ_TARGETS); do \
	    echo "fuzz-long: fuzz_$$t for $(FUZZ_SECONDS) s"; \
	    $(CURDIR)/tests/fuzz/run_fuzz.sh ./tests/fuzz/fuzz_$$t \
	        $(CURDIR)/tests/fuzz/corpus/$$t $(FUZZ_SECONDS) \
	        $(CURDIR)/tests/fuzz/$$t.dict || exit 1; \
	done

bench-timers: build
	$(BUILD)/bench/bench_timers

bench-scan: build
	$(BUILD)/bench/bench_scan

# The table hash on the subscribe path: the old unkeyed FNV-1a against the
# keyed SipHash-2-4, three rounds each (bench/run_hash.sh; about 30 s).
bench-hash: build
	cmake --build $(BUILD) --target bench_hash bench_hash_fnv -j $(JOBS)
	bench/run_hash.sh $(BUILD)/bench

bench-idle: build
	LUBDUB_BINARY=$(BUILD)/lubdub IDLE_CLIENT=$(BUILD)/bench/idle_client \
	    bench/run_idle.sh

# Fan-out vs peers (bench/run_fanout.py). Ends with one "fanout: ..." line;
# tables go to bench/results/latest.md. Smoke run: FANOUT_ARGS=--quick
FANOUT_ARGS ?=
bench-fanout:
	$(MAKE) build
	BUILD=$(abspath $(BUILD)) python3 bench/run_fanout.py $(FANOUT_ARGS)

# Webhooks off vs on to a local receiver, paired (run_fanout.py --webhooks,
# issue 12). Ends with one "webhooks: ..." line; tables in
# bench/results/webhooks.md. ~4 min; WEBHOOKS_ARGS=--quick for ~1 min.
WEBHOOKS_ARGS ?=
bench-webhooks:
	$(MAKE) build
	BUILD=$(abspath $(BUILD)) python3 bench/run_fanout.py --webhooks $(WEBHOOKS_ARGS)

# Compression (bench/run_compression.py, issue 34, docs/BENCHMARKS.md
# "Compression"): the hub plain and compressed, uWS.js 20.30 with
# compression and the raw ceiling, 1 publisher -> 1,000 subscribers on the
# corpus, a threshold sweep, idle bytes per session, zlib vs libdeflate
# (bench_deflate, built when libdeflate-dev is there). Ends with one
# "compression: ..." line; tables in bench/results/compression.md. ~6 min;
# COMPRESSION_ARGS=--quick for ~1.5 min. LUBDUB_BINARY picks another hub.
COMPRESSION_ARGS ?=
bench-compression:
	$(MAKE) build
	BUILD=$(abspath $(BUILD)) python3 bench/run_compression.py $(COMPRESSION_ARGS)

# Recovery (bench/run_recovery.py, issue 35, docs/BENCHMARKS.md
# "Recovery"): the same hub with history off and on, CPU per delivery at a
# fixed rate (plain subscribers and subscribers that sent lubdub:resume),
# memory per retained event on the corpus, idle bytes per session. Ends
# with one "recovery: ..." line; tables in bench/results/recovery.md.
# ~6 min; RECOVERY_ARGS=--quick for ~1.5 min. LUBDUB_BINARY picks another hub.
RECOVERY_ARGS ?=
bench-recovery:
	$(MAKE) build
	BUILD=$(abspath $(BUILD)) python3 bench/run_recovery.py $(RECOVERY_ARGS)

# Three nodes + Redis vs one node, paired (bench/run_cluster.py,
# docs/BENCHMARKS.md "Scale-out"). Ends with one "cluster: ..." line; tables
# in bench/results/cluster.md. ~4.5 min; CLUSTER_ARGS=--quick for ~1 min.
# CLUSTER_ARGS=--history instead measures history's Redis writes in the
# cluster, off and on paired (bench/run_cluster_history.py, docs/BENCHMARKS.md
# "Recovery in a cluster"); its last line is "recovery-cluster: ...".
CLUSTER_ARGS ?=
bench-cluster:
	deploy/install-deps.sh cluster
	$(MAKE) build
	BUILD=$(abspath $(BUILD)) python3 bench/run_cluster.py $(CLUSTER_ARGS)

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
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)

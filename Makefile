# Thin wrapper over CMake and ctest. The two commands: make run, make test.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
RUN_ARGS   ?=

.PHONY: all build run test test-unit test-asan deps deps-test clean \
        bench-timers bench-scan bench-idle bench-fanout

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

# Every test through ctest, then the unit tests once more under ASan+UBSan.
test: deps-test build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -L unit -j $(JOBS)

test-asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	    -DHUB_SANITIZE=address,undefined $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -L asan -j $(JOBS)

bench-timers: build
	$(BUILD)/bench/bench_timers

# Fan-out vs peers (bench/run_fanout.py). Ends with one "fanout: ..." line;
# tables go to bench/results/latest.md. Smoke run: FANOUT_ARGS=--quick
FANOUT_ARGS ?=
bench-fanout:
	$(MAKE) build
	BUILD=$(abspath $(BUILD)) python3 bench/run_fanout.py $(FANOUT_ARGS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)

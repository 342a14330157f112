# Thin wrapper around CMake. `make` builds, `make test` runs every test this machine can run, `make run` runs the
# default campaign on what is present (GPUs, else the host executor).
BUILD ?= build
JOBS ?= $(shell nproc)
# ctest -j: tests run side by side where they allow it (tests/README.md, "Running them in parallel"); three per
# core, since most tests wait (for peers, timeouts, watchdogs) more than they compute.
TEST_JOBS ?= $(shell echo $$((3 * $(JOBS))))
CMAKE_ARGS ?=
# Compilations through ccache where it is found when CMake configures (scripts/install_deps.sh, run just before,
# installs it), with paths relative to the checkout, so that another clone of the same sources (CI's) reuses the
# cache.
export CCACHE_BASEDIR := $(CURDIR)
LAUNCHERS = $$(command -v ccache >/dev/null && for l in C CXX CUDA; do echo -DCMAKE_$${l}_COMPILER_LAUNCHER=ccache; done)

.PHONY: all build configure test test-extra test-asan run clean

all: build

$(BUILD)/CMakeCache.txt:
	scripts/install_deps.sh || echo "make: some Debian packages are missing; continuing (CMake says what it cannot find)"
	PATH="$$PATH:/usr/local/cuda/bin" cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(LAUNCHERS) $(CMAKE_ARGS)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Every area once: the reruns of its tests under another transport, block count or host layout (label extra) are
# test-extra's. CI (.ci/run) runs both. Each runs the tests that share the machine first, then those that must run
# alone (label serial) one after another: mixed in one ctest run, each of those waits for every running test to end.
# make test runs the Python chain beside the serial tests (tests/run_make_test.sh).
CTEST = ctest --output-on-failure --timeout 900 -j $(TEST_JOBS)
test: build
	tests/run_make_test.sh $(BUILD) $(TEST_JOBS)

test-extra: build
	cd $(BUILD) && { $(CTEST) -L extra -LE serial; a=$$?; $(CTEST) -L extra -L serial; b=$$?; [ $$a$$b = 00 ]; }

# The host executor's engine, abort and stress tests, and the harness's stress under mpirun (its watchdog aborts
# from another thread), again under AddressSanitizer, in their own build folder: the tests labelled asan (ASAN_TESTS
# builds their programs). Leaks are not checked: a communicator whose abort gave up waiting for its collectives stays
# allocated by design (docs/design.md, "Abort"); comm_lifetime_test bounds what every other end leaves. One test per
# core: the sanitizer's instrumentation makes the tests compute more than they wait.
ASAN_BUILD ?= build-asan
ASAN_TESTS = core_abort_test core_cq_test core_prefetch_test core_programs_test api_errors_test host_engine_test \
	host_stress_test dfccl-harness mismatch_hosts_test mp_collectives net_fault_peer
test-asan: configure
	PATH="$$PATH:/usr/local/cuda/bin" cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDFCCL_ASAN=ON $(LAUNCHERS) $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target $(ASAN_TESTS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 ctest --output-on-failure --timeout 900 \
		-j $(JOBS) -L asan

run: build
	scripts/run_campaign.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)

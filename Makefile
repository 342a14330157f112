# Thin wrapper around CMake. `make` builds, `make test` runs every test this machine can run, `make run` runs the
# default campaign on what is present (GPUs, else the host executor).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all build configure test run clean

all: build

$(BUILD)/CMakeCache.txt:
	scripts/install_deps.sh
	PATH="$$PATH:/usr/local/cuda/bin" cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 900

run: build
	scripts/run_campaign.sh

clean:
	rm -rf $(BUILD)

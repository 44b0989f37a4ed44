# Lazaret front door. The README names exactly two set-up commands:
#   make demo    install what is missing, build, run the main job
#   make check   install what is missing, build, run every test
# Everything else here is for developers.

BUILD      ?= build
ASAN_BUILD ?= build-asan

.PHONY: all build build-asan deps check demo fuzz clean

all: build

deps:
	@scripts/install-deps.sh

build:
	@scripts/build.sh release $(BUILD)

build-asan:
	@scripts/build.sh asan $(ASAN_BUILD)

check:
	@scripts/check.sh

demo:
	@scripts/demo.sh

# A longer fuzzing run (see docs/testing.md): make fuzz FUZZ_SECONDS=600
FUZZ_SECONDS ?= 300
fuzz: build-asan
	@scripts/fuzz.sh $(ASAN_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)

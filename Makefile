# m0serve: the Makefile names the targets; CMake builds.
#   make serve   install what is missing, build, serve the demo
#   make test    install what is missing, build, run every test
SHELL := /bin/bash
.DEFAULT_GOAL := build

BUILD     ?= build
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
SANITIZER ?=
PY        := /usr/bin/python3
M0SERVE   := $(BUILD)/m0serve
LISTEN    ?= 127.0.0.1:8000
ADMIN     ?= 127.0.0.1:8001
PROPERTY_CASES ?= 200
export PYTHONDONTWRITEBYTECODE := 1

DEB_PACKAGES := libevent-dev libhttp-parser-dev python3-dev python3-django \
                libssl-dev catch2 librapidcheck-dev cmake g++ pkg-config make \
                chromium fonts-liberation clang-format
# The fuzzers (make fuzz, make fuzz-brief): clang and its libFuzzer runtime.
DEB_PACKAGES += clang libclang-rt-14-dev
# Node.js and npm drive the browser test (playwright-core from npm); Debian's
# packages are used only when the machine has none.
NODE_PACKAGES := $(if $(shell command -v node),,nodejs) $(if $(shell command -v npm),,npm)
GRANT_KEYS ?= $(BUILD)/grant.keys
ADMIN_KEY  ?= $(BUILD)/admin.key
TEXTSHELF  := fixtures/textshelf

.PHONY: deps build configure test unit property property-long test-python smoke test-browser \
        sabotage soak bench-holds serve serve-djangoproj fixtures-db clean format format-check

# Every smoke/NN-NAME.py is a smoke, run by `make smoke-NAME` and by `make smoke`;
# every group of sabotage/GROUP-*.mutation has `make sabotage-GROUP`. A new file
# needs no edit here.
SMOKE_TARGETS := $(shell ls smoke/[0-9][0-9]-*.py 2>/dev/null | sed -E 's|smoke/[0-9]+-(.*)\.py|smoke-\1|')
SABOTAGE_GROUPS := $(shell ls sabotage/*.mutation 2>/dev/null | sed -E 's|sabotage/([a-z0-9]+)-.*|\1|' | sort -u)

# Installs the Debian packages that are missing (apt-get, when root); prints
# the command otherwise.
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	missing="$$missing $(NODE_PACKAGES)"; missing=$$(echo $$missing); \
	if [ -z "$$missing" ]; then echo "deps: all Debian packages present"; exit 0; fi; \
	echo "deps: missing: $$missing"; \
	if [ "$$(id -u)" = 0 ]; then \
	  DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	else \
	  echo "deps: run: sudo apt-get update && sudo apt-get install -y $$missing"; exit 1; \
	fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DSANITIZER=$(SANITIZER)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# ---- tests -------------------------------------------------------------
test: deps build
	$(MAKE) --no-print-directory format-check unit property test-python smoke sabotage fuzz-brief
	@echo "make test: every part passed"

unit: build
	cd $(BUILD) && ctest -L unit --output-on-failure -j $(JOBS)

property: build
	cd $(BUILD) && RC_PARAMS="max_success=$(PROPERTY_CASES)" ctest -L property --output-on-failure

property-long: build
	cd $(BUILD) && RC_PARAMS="max_success=5000" ctest -L property --output-on-failure

# The m0 package (grants, names, hold helper), djangoproj's views, textshelf's
# authorization: unittest, with Debian's interpreter.
test-python: fixtures-db
	$(PY) -m unittest discover -s src/wsgi/tests -t src/wsgi
	cd $(TEXTSHELF) && $(PY) manage.py test textshelf -v 1

smoke: $(SMOKE_TARGETS)

# The browser smoke (headless Chromium driven by playwright-core from npm)
# fails, rather than skips, when the browser is missing.
smoke-%: build fixtures-db
	@[ -n "$(wildcard smoke/[0-9][0-9]-$*.py)" ] || { echo "make: no smoke/NN-$*.py"; exit 2; }
	M0_REQUIRE_BROWSER=1 $(PY) $(wildcard smoke/[0-9][0-9]-$*.py) --binary $(M0SERVE)

test-browser: smoke-textshelf-browser

sabotage: build
	$(PY) sabotage/run.py --build $(BUILD)/sabotage --all

# Not part of `make test`: textshelf under load for SOAK_SECONDS, then checked
# for loss, duplicates, failed requests and leaks (smoke/soak.py).
SOAK_SECONDS ?= 180
soak: build fixtures-db
	SOAK_SECONDS=$(SOAK_SECONDS) $(PY) smoke/soak.py --binary $(M0SERVE)

sabotage-%: build
	$(PY) sabotage/run.py --build $(BUILD)/sabotage --group $*

# A baseline, not a test: per-hold memory and fan-out rate, into build/figures.jsonl.
bench-holds: build
	$(PY) smoke/bench_holds.py --binary $(M0SERVE) --holds 2000 --events 200

# ---- fuzzers (libFuzzer, clang) -------------------------------------------
# Each src/<dir>/fuzz_<what>.cpp is a fuzzer, built into $(FUZZ_BUILD) by
# clang++ with AddressSanitizer and UndefinedBehaviorSanitizer (CMake option
# M0_FUZZ); fuzz/corpus/<what>/ holds its seeds (regress-* once found a bug).
# fuzz/run.sh runs them one after the other; a crash lands in
# $(FUZZ_BUILD)/crashes/ with the command that replays it.
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS="json sse"]
FUZZ_BUILD         ?= build-fuzz
FUZZ_SECONDS       ?= 60
FUZZ_BRIEF_SECONDS ?= 10
FUZZ_TARGETS       ?= $(sort $(patsubst fuzz_%.cpp,%,$(notdir $(wildcard src/*/fuzz_*.cpp))))

.PHONY: fuzz fuzz-build fuzz-brief fuzz-corpus

$(FUZZ_BUILD)/CMakeCache.txt:
	cmake -S . -B $(FUZZ_BUILD) -DM0_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang

fuzz-build: $(FUZZ_BUILD)/CMakeCache.txt
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

fuzz: fuzz-build
	fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Part of `make test`: every fuzzer replays its seeds, then fuzzes briefly,
# with a fixed seed so a run of `make test` explores the same inputs each time.
fuzz-brief: fuzz-build
	FUZZ_SEED=1 fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_BRIEF_SECONDS) $(FUZZ_TARGETS)

# Rewrites the seed files from fuzz/make_corpus.py.
fuzz-corpus:
	$(PY) fuzz/make_corpus.py
# ---- end of fuzzers -------------------------------------------------------

# ---- the demo -----------------------------------------------------------
fixtures-db:
	cd fixtures/djangoproj && $(PY) manage.py migrate --noinput -v 0
	cd $(TEXTSHELF) && $(PY) manage.py seed >/dev/null

# A grant key file (KID HEX, the first key signs), made once.
$(GRANT_KEYS):
	@mkdir -p $(dir $@)
	$(PY) -c 'import secrets; print("k1", secrets.token_hex(32))' > $@
	chmod 600 $@

# The admin listener's bearer key, made once.
$(ADMIN_KEY):
	@mkdir -p $(dir $@)
	$(PY) -c 'import secrets; print(secrets.token_urlsafe(32))' > $@
	chmod 600 $@

# The main demo: textshelf on the WSGI pool and the mojo mount, with --realtime,
# and the admin listener (publish, close, metrics) on loopback.
serve: deps build fixtures-db $(GRANT_KEYS) $(ADMIN_KEY)
	@cd $(TEXTSHELF) && $(PY) manage.py seed
	@echo "admin: http://$(ADMIN)/metrics; POST /publish with Authorization: Bearer \$$(cat $(ADMIN_KEY))"
	M0_GRANT_KEY_FILE=$(abspath $(GRANT_KEYS)) $(M0SERVE) --listen $(LISTEN) --chdir $(TEXTSHELF) \
	  --mount /=textshelf_site.wsgi:application --mount /native=mojo --realtime \
	  --grant-key-file $(GRANT_KEYS) --admin-listen $(ADMIN) --admin-key-file $(ADMIN_KEY)

# The smaller demo: djangoproj (publish form, hold view) with the mojo mount.
serve-djangoproj: deps build fixtures-db $(ADMIN_KEY)
	$(M0SERVE) --listen $(LISTEN) --chdir fixtures/djangoproj \
	  --mount /=djangoproj.wsgi:application --mount /native=mojo --realtime \
	  --admin-listen $(ADMIN) --admin-key-file $(ADMIN_KEY)

clean:
	rm -rf $(BUILD)

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp')

format-check:
	clang-format --dry-run -Werror $$(git ls-files '*.cpp' '*.hpp')

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

DEB_PACKAGES := ccache libevent-dev libhttp-parser-dev python3-dev python3-django \
                libssl-dev catch2 librapidcheck-dev cmake g++ pkg-config make \
                chromium fonts-liberation clang-format
# The fuzzers (make fuzz, make fuzz-brief): clang and its libFuzzer runtime.
DEB_PACKAGES += clang libclang-rt-14-dev
# The admin API's JSON (header-only); GRIP: pushpin-publish and PyJWT drive
# smoke 80, and curl is its long-polling client.
DEB_PACKAGES += nlohmann-json3-dev pushpin python3-jwt curl
# The Redis bus (--bus redis://...): hiredis for the server, redis-server for
# its tests, python3-redis for m0.publish outside m0serve; redis-sentinel for
# the tests of --bus redis+sentinel:// (a master, a replica, three sentinels).
DEB_PACKAGES += libhiredis-dev redis-server python3-redis redis-sentinel
# WebSockets: libwslay-dev reads clients' frames (src/server/ws_conn.cpp);
# python3-websockets and python3-wsproto are smoke 98-websocket's clients (curl its handshake's).
DEB_PACKAGES += libwslay-dev python3-websockets python3-wsproto
# permessage-deflate (RFC 7692): zlib compresses events and inflates clients' messages.
DEB_PACKAGES += zlib1g-dev
# systemd: sd_notify and socket activation (libsystemd), and
# systemd-socket-activate, which smoke 10 starts m0serve under.
DEB_PACKAGES += libsystemd-dev systemd
# TLS on the listeners (--certfile): libevent's OpenSSL bufferevents (the
# library behind pkg-config's libevent_openssl; libevent-dev names it too),
# and the openssl CLI that smoke 97-tls and test_tls make certificates and
# drive s_client with (and the bench's tls part its certificate; its driver,
# build/sse_load, is a TLS client through the same bufferevents).
DEB_PACKAGES += libevent-openssl-2.1-7 openssl
# HTTP/2 (h2 by ALPN over TLS, h2c with prior knowledge): libnghttp2-dev
# drives the frames (and the bench driver's client sessions, sse_load
# --streams); nghttp2-client (nghttp, h2load) and python3-h2 are the
# tests' clients (smoke 99-http2 writes hostile frame sequences with h2).
DEB_PACKAGES += libnghttp2-dev nghttp2-client python3-h2
# --config FILE: TOML, read with Debian's toml++.
DEB_PACKAGES += libtomlplusplus-dev
# smoke 93-virtualenv makes a venv and installs into it offline: venv, and
# pip, setuptools and wheel to build a wheel without PyPI.
DEB_PACKAGES += python3-venv python3-pip python3-setuptools python3-wheel
# smoke 90-nginx puts Debian's nginx in front of m0serve (on its own ports).
DEB_PACKAGES += nginx
# make install and smoke 90 (an application's own binary built against the
# installed package) need nothing more than the build does: cmake, g++,
# pkg-config and the -dev packages above, which the package config finds again.
# Node.js and npm drive the browser test (playwright-core from npm); Debian's
# packages are used only when the machine has none.
NODE_PACKAGES := $(if $(shell command -v node),,nodejs) $(if $(shell command -v npm),,npm)
GRANT_KEYS ?= $(BUILD)/grant.keys
ADMIN_KEY  ?= $(BUILD)/admin.key
TEXTSHELF  := fixtures/textshelf

.PHONY: deps build configure install test unit property property-long test-python smoke test-browser \
        test-asan test-tsan sabotage soak bench bench-deps bench-holds serve serve-djangoproj fixtures-db clean format format-check \
        readme-flags

# Every smoke/NN-NAME.py is a smoke, run by `make smoke-NAME` and by `make smoke`;
# every group of sabotage/GROUP-*.mutation has `make sabotage-GROUP`. A new file
# needs no edit here.
SMOKE_TARGETS := $(shell ls smoke/[0-9][0-9]-*.py 2>/dev/null | sed -E 's|smoke/[0-9]+-(.*)\.py|smoke-\1|')
SABOTAGE_GROUPS := $(shell ls sabotage/*.mutation 2>/dev/null | sed -E 's|sabotage/([a-z0-9]+)-.*|\1|' | sort -u)

# $(call install_debs,PACKAGES): installs those of PACKAGES that are missing
# (apt-get, when root); prints the command otherwise. While it installs, a
# policy-rc.d that refuses service starts is put in place when the machine has
# none, so nginx or redis-server is installed without starting the system's
# daemon (nginx would take port 80); the tests start their own.
install_debs = missing=$$(for p in $(1); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	missing=$$(echo $$missing); \
	if [ -z "$$missing" ]; then echo "deps: all Debian packages present"; exit 0; fi; \
	echo "deps: missing: $$missing"; \
	if [ "$$(id -u)" = 0 ]; then \
	  rcd=/usr/sbin/policy-rc.d; own=; \
	  if [ ! -e $$rcd ]; then own=1; printf '\#!/bin/sh\nexit 101\n' > $$rcd; chmod 755 $$rcd; fi; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	  rc=$$?; [ -z "$$own" ] || rm -f $$rcd; exit $$rc; \
	else \
	  echo "deps: run: sudo apt-get update && sudo apt-get install -y $$missing"; exit 1; \
	fi

deps:
	@$(call install_debs,$(DEB_PACKAGES) $(NODE_PACKAGES))

# Runs CMake when $(BUILD) is new, when an earlier run stopped before writing
# the build files (a package was missing), and whenever SANITIZER is not the
# value the folder was configured with.
configure:
	@cached=$$(sed -n 's/^SANITIZER:[A-Z]*=//p' $(BUILD)/CMakeCache.txt 2>/dev/null); \
	if [ ! -f $(BUILD)/Makefile ] || [ "$$cached" != "$(SANITIZER)" ]; then \
	  echo "cmake -S . -B $(BUILD) -DSANITIZER=$(SANITIZER)"; \
	  cmake -S . -B $(BUILD) -DSANITIZER=$(SANITIZER); \
	fi

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The binary, the libraries and headers an application builds its own server
# with, the m0 Python package and publish.lua, the CMake package (m0serveConfig);
# see the README's "Your own mojo mounts". DESTDIR stages, as usual.
PREFIX ?= /usr/local
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

# ---- tests -------------------------------------------------------------
# Each part in turn, stopping at the first that fails; the time each took is
# printed as it ends, and all of them at the end.
TEST_PARTS := format-check unit property test-python smoke sabotage fuzz-brief
test: deps build
	@t0=$$(date +%s); took=; \
	for part in $(TEST_PARTS); do \
	  s=$$(date +%s); \
	  $(MAKE) --no-print-directory $$part || { \
	    echo "make test: $$part FAILED after $$(( $$(date +%s) - s )) s"; exit 1; }; \
	  echo "make test: $$part took $$(( $$(date +%s) - s )) s"; \
	  took="$$took $$part $$(( $$(date +%s) - s ))s"; \
	done; \
	echo "make test: every part passed in $$(( $$(date +%s) - t0 )) s:$$took"

# A failure ends with one `reproduce:` line per failed test
# (.ci/ctest-reproduce.sh), a property's with RapidCheck's reproduce string.
unit: build
	@cd $(BUILD) && ctest -L unit --output-on-failure -j $(JOBS) || { \
	  cd $(CURDIR) && .ci/ctest-reproduce.sh $(BUILD); exit 1; }

property: build
	@cd $(BUILD) && RC_PARAMS="max_success=$(PROPERTY_CASES)" ctest -L property --output-on-failure || { \
	  cd $(CURDIR) && .ci/ctest-reproduce.sh $(BUILD); exit 1; }

property-long: build
	@cd $(BUILD) && RC_PARAMS="max_success=5000" ctest -L property --output-on-failure || { \
	  cd $(CURDIR) && .ci/ctest-reproduce.sh $(BUILD); exit 1; }

# The m0 package (grants, names, hold helper), djangoproj's views, textshelf's
# authorization: unittest, with Debian's interpreter.
test-python: build fixtures-db
	$(PY) -m unittest discover -s src/wsgi/tests -t src/wsgi
	cd $(TEXTSHELF) && $(PY) manage.py test textshelf -v 1

smoke: $(SMOKE_TARGETS)

# The browser smokes (headless Chromium driven by playwright-core from npm)
# and the nginx smoke fail, rather than skip, when Chromium or nginx is missing.
smoke-%: build fixtures-db
	@[ -n "$(wildcard smoke/[0-9][0-9]-$*.py)" ] || { echo "make: no smoke/NN-$*.py"; exit 2; }
	M0_REQUIRE_BROWSER=1 M0_REQUIRE_NGINX=1 $(PY) $(wildcard smoke/[0-9][0-9]-$*.py) --binary $(M0SERVE)

test-browser: smoke-textshelf-browser smoke-browser-streams

# ---- sanitizers ---------------------------------------------------------
# Each has its own build folder, and CMake runs with its SANITIZER every time:
# a folder configured earlier with another setting is reconfigured, not reused.
#   test-asan  ASan + UBSan: every unit test, the properties, every smoke.
#   test-tsan  TSan: the unit tests of what threads share or hand over (pools,
#              completion ring and notify queue, bus and its lanes, loop and
#              server, several loops (test_loop_set), both
#              pools' hold paths), the properties, every smoke. The others (the
#              parser, JSON, SSE, grants, metrics text, history, the hold table
#              and cursor) run on one thread: ASan covers them.
ASAN_BUILD := build-asan
ASAN_SANITIZER := address,undefined
TSAN_BUILD := build-tsan
SAN_PROPERTY_CASES ?= 1000
SAN_SMOKES := $(sort $(wildcard smoke/[0-9][0-9]-*.py))
TSAN_TESTS := test_pool test_stream_state test_notify_queue test_bus test_publish_batch test_hold_loop test_server \
              test_mojo_pool test_wsgi_pool test_loop_set test_redis_faults test_wsgi_redis
PROPERTY_BINS := $(patsubst property_tests/%.cpp,%,$(wildcard property_tests/prop_*.cpp))
SMOKE_LOGS := build/smoke-logs

# halt_on_error: the first report ends the process with a non-zero code, so a
# test fails, and a smoke fails its server's exit-code check (servers stop with
# SIGTERM and must exit 0). PYTHONMALLOC=malloc: LeakSanitizer does not scan
# pymalloc's arenas, so whatever the interpreter keeps, and what our code hands
# it (a capsule's pointer), would otherwise read as leaked.
ASAN_ENV := PYTHONMALLOC=malloc \
  ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
TSAN_ENV := PYTHONMALLOC=malloc TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

# $(call san_ctest,FOLDER,ENV,CTEST ARGS): ctest there; on a failure, the
# command that reruns what failed.
san_ctest = cd $(1) && env $(2) ctest $(3) --output-on-failure --no-tests=error || { \
  cd $(CURDIR) && .ci/ctest-reproduce.sh $(1) $(2); exit 1; }

# The first line of a report: ASan and LSan, TSan, UBSan.
SAN_REPORT := ERROR: [A-Za-z]+Sanitizer|WARNING: ThreadSanitizer|: runtime error:

# $(call san_smokes,FOLDER,ENV,SCRIPTS): each smoke against FOLDER/m0serve (the
# browser one fails, as in `make smoke`, when there is no browser), all of them
# run; then a sanitizer report in any server log written meanwhile is a failure
# too (a server whose exit code a phase does not check).
san_smokes = stamp=$(1)/smoke-start; touch $$stamp; failed=; \
  for s in $(3); do env M0_REQUIRE_BROWSER=1 $(2) $(PY) $$s --binary $(1)/m0serve || failed="$$failed $$s"; done; \
  reports=$$(find $(SMOKE_LOGS) -type f -newer $$stamp -exec grep -l -E '$(SAN_REPORT)' {} + 2>/dev/null); \
  for r in $$reports; do echo "sanitizer report in $$r:"; \
    grep -E -A40 '$(SAN_REPORT)' $$r | head -80; done; \
  for s in $$failed; do echo "reproduce: env M0_REQUIRE_BROWSER=1 $(2) $(PY) $$s --binary $(1)/m0serve"; done; \
  [ -z "$$failed$$reports" ]

# $(call timed,NAME,PART,COMMAND): runs COMMAND, then prints how long PART
# took (the sanitizer runs' parts, as make test prints its own).
timed = t_part=$$(date +%s); $(3) || { echo "make $(1): $(2) FAILED after $$(( $$(date +%s) - t_part )) s"; exit 1; }; \
  echo "make $(1): $(2) took $$(( $$(date +%s) - t_part )) s"

test-asan: fixtures-db
	@$(call timed,test-asan,build,cmake -S . -B $(ASAN_BUILD) -DSANITIZER=$(ASAN_SANITIZER) && cmake --build $(ASAN_BUILD) -j $(JOBS))
	@$(call timed,test-asan,unit,$(call san_ctest,$(ASAN_BUILD),$(ASAN_ENV),-L unit -j $(JOBS)))
	@$(call timed,test-asan,property,$(call san_ctest,$(ASAN_BUILD),$(ASAN_ENV) RC_PARAMS=max_success=$(SAN_PROPERTY_CASES),-L property))
	@$(call timed,test-asan,smoke,$(call san_smokes,$(ASAN_BUILD),$(ASAN_ENV),$(SAN_SMOKES)))
	@echo "make test-asan: every part passed"

test-tsan: fixtures-db
	@$(call timed,test-tsan,build,cmake -S . -B $(TSAN_BUILD) -DSANITIZER=thread && cmake --build $(TSAN_BUILD) -j $(JOBS) --target m0serve $(TSAN_TESTS) $(PROPERTY_BINS))
	@$(call timed,test-tsan,unit,$(call san_ctest,$(TSAN_BUILD),$(TSAN_ENV),-L unit -j $(JOBS) -R '^($(shell echo $(TSAN_TESTS) | tr ' ' '|'))$$'))
	@$(call timed,test-tsan,property,$(call san_ctest,$(TSAN_BUILD),$(TSAN_ENV) RC_PARAMS=max_success=$(SAN_PROPERTY_CASES),-L property))
	@$(call timed,test-tsan,smoke,$(call san_smokes,$(TSAN_BUILD),$(TSAN_ENV),$(SAN_SMOKES)))
	@echo "make test-tsan: every part passed"

sabotage: build
	$(PY) sabotage/run.py --build $(BUILD)/sabotage --all

# Not part of `make test`: textshelf under load for SOAK_SECONDS, then checked
# for loss, duplicates, failed requests and leaks (smoke/soak.py).
SOAK_SECONDS ?= 180
soak: build fixtures-db
	SOAK_SECONDS=$(SOAK_SECONDS) $(PY) smoke/soak.py --binary $(M0SERVE)

sabotage-%: build
	$(PY) sabotage/run.py --build $(BUILD)/sabotage --group $*

# Not a test: m0serve's holds beside nchan's (nginx, two workers) and
# Pushpin's (with its zurl), requests under wrk beside gunicorn (gthread),
# uWSGI and nginx, Django's FileResponse of 1 MiB and 100 MiB files beside
# gunicorn and uWSGI, and a mojo hold's head behind busy Python threads;
# holds over TLS and HTTP/2 beside nchan on nginx with `ssl http2`, and full
# TLS handshakes a second (part tls); WebSocket subscribers beside nchan's
# (part ws); each server fresh, interleaved,
# BENCH_RUNS times; prints medians and ratios against the targets, appends
# JSON lines to build/bench.jsonl (smoke/bench.py).
BENCH_PACKAGES := nginx libnginx-mod-nchan pushpin zurl gunicorn uwsgi uwsgi-plugin-python3 wrk
# 1000,5000,10000,19000 (the fd limit's reach) takes about an hour on 2
# cores; the default, under half an hour.
BENCH_HOLDS    ?= 1000,10000
BENCH_RUNS     ?= 3
BENCH_PARTS    ?= holds,requests,files,head,publish,h2,tls,ws,scale
BENCH_STORM    ?= 2000
# The tls part's hold counts (nginx keeps about 50 KB a TLS hold).
BENCH_TLS_HOLDS ?= 1000
# The ws part's hold counts (steady rows).
BENCH_WS_HOLDS ?= 1000
# The scale part: holds in all, over --workers (19,000 a worker and a
# driver at most: the fd limit here is 20,000 a process); about 2.5 min a run.
BENCH_SCALE_HOLDS   ?= 76000
BENCH_SCALE_WORKERS ?= 4
bench-deps:
	@$(call install_debs,$(BENCH_PACKAGES))

bench: deps build fixtures-db bench-deps
	$(PY) smoke/bench.py --binary $(M0SERVE) --driver $(BUILD)/sse_load --parts $(BENCH_PARTS) \
	  --holds $(BENCH_HOLDS) --runs $(BENCH_RUNS) --storm-holds $(BENCH_STORM) \
	  --tls-holds $(BENCH_TLS_HOLDS) --ws-holds $(BENCH_WS_HOLDS) \
	  --scale-holds $(BENCH_SCALE_HOLDS) --scale-workers $(BENCH_SCALE_WORKERS)

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
	  --ws-over-http /presence --grant-key-file $(GRANT_KEYS) --admin-listen $(ADMIN) --admin-key-file $(ADMIN_KEY)

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
	@# A mutation whose text the code no longer has is said here, in seconds,
	@# not after the smokes.
	$(PY) sabotage/run.py --all --check

# The README's table of flags, written again from the flag table
# (src/app/flags.cpp) by `m0serve --help-markdown`, between its two marker
# lines. test_options fails while the README's differs.
readme-flags: configure
	cmake --build $(BUILD) -j $(JOBS) --target m0serve
	$(M0SERVE) --help-markdown > $(BUILD)/flags.md
	awk -v table=$(BUILD)/flags.md \
	  '/^<!-- \/flags -->/ { skip = 0 } !skip { print } \
	   /^<!-- flags: / { while ((getline line < table) > 0) print line; skip = 1 }' \
	  README.md > $(BUILD)/README.md.new
	mv $(BUILD)/README.md.new README.md

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
                libssl-dev catch2 librapidcheck-dev cmake g++ pkg-config make

.PHONY: deps build configure test unit property property-long smoke smoke-basic \
        smoke-django-realtime smoke-mojo-mount-hold sabotage sabotage-pool \
        serve fixtures-db clean format format-check

# Installs the Debian packages that are missing (apt-get, when root); prints
# the command otherwise.
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
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
	$(MAKE) --no-print-directory unit property smoke sabotage
	@echo "make test: every part passed"

unit: build
	cd $(BUILD) && ctest -L unit --output-on-failure -j $(JOBS)

property: build
	cd $(BUILD) && RC_PARAMS="max_success=$(PROPERTY_CASES)" ctest -L property --output-on-failure

property-long: build
	cd $(BUILD) && RC_PARAMS="max_success=5000" ctest -L property --output-on-failure

smoke: smoke-basic smoke-django-realtime smoke-mojo-mount-hold

smoke-basic: build fixtures-db
	$(PY) smoke/10-basic.py --binary $(M0SERVE)

smoke-django-realtime: build fixtures-db
	$(PY) smoke/20-django-realtime.py --binary $(M0SERVE)

smoke-mojo-mount-hold: build fixtures-db
	$(PY) smoke/30-mojo-mount-hold.py --binary $(M0SERVE)

sabotage: build
	$(PY) sabotage/run.py --build $(BUILD)/sabotage --all

sabotage-pool: build
	$(PY) sabotage/run.py --build $(BUILD)/sabotage --group pool

# ---- the demo -----------------------------------------------------------
fixtures-db:
	cd fixtures/djangoproj && $(PY) manage.py migrate --noinput -v 0

serve: deps build fixtures-db
	$(M0SERVE) --listen $(LISTEN) --chdir fixtures/djangoproj \
	  --mount /=djangoproj.wsgi:application --mount /native=mojo --realtime

clean:
	rm -rf $(BUILD)

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp')

format-check:
	clang-format --dry-run -Werror $$(git ls-files '*.cpp' '*.hpp')

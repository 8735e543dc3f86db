# dw-router, the PHP-extension way: `make`, `make test`, `make install`.
# Everything runs inside the development environment (scripts/devenv): PHP 8.4, etcd,
# php-fpm, nginx. `make` provisions it on first use.
#
# PHP selects the PHP version (default 8.4): `PHP=8.5 make build test` provisions the 8.5
# environment (its own root), builds the extension against it into target/php8.5 and runs
# the suites that depend on the PHP version there. The other targets are for 8.4.

# A bare `make` builds, as `make help` says; the demo is `make demo`.
.DEFAULT_GOAL := build

PHP      ?= 8.4
export PHP
DEVENV   := scripts/devenv
IN_ENV   := $(DEVENV) exec --
CARGO    := cargo
ifeq ($(PHP),8.4)
TARGET   := target
# xtask (man pages, completions) is built by `make deb` only.
BUILD    := $(CARGO) build --offline --release --workspace --exclude xtask --bins --lib
else
# Only the extension depends on the PHP version; its own target directory leaves the 8.4
# build in target/release alone.
TARGET   := target/php$(PHP)
BUILD    := env CARGO_TARGET_DIR=$(CURDIR)/$(TARGET) $(CARGO) build --offline --release -p dw-router
endif
SO       := $(TARGET)/release/libdw_router.so

# The whole stack (etcd, dw-agent, OpenLiteSpeed + lsphp with the extension, or nginx +
# php-fpm where no LiteSpeed is found), started and stopped
# inside one devenv run; `make up` leaves it running in target/stack/, `make down` stops it.
demo: build
	@$(IN_ENV) scripts/demo

up: build
	@scripts/stack up

down:
	@scripts/stack down

.PHONY: all demo up down chaos build devenv fetch tools-test test bench install deb stubs check-zts fmt lint clean help

all: build

help:
	@echo "make demo       build, run the whole stack (etcd, dw-agent, OpenLiteSpeed + lsphp; nginx + php-fpm without LiteSpeed), route, drain, restore, stage, a drain refused for overload and a 40 % shed measured"
	@echo "make up / down  start the stack and leave it running (prints the URL) / stop it"
	@echo "make            build the extension (target/release/libdw_router.so) and binaries"
	@echo "make test       every test suite, and the phpt suite on PHP 8.5; ends with 'N passed, N failed'"
	@echo "PHP=8.5 make build test   the extension against PHP 8.5 (target/php8.5), its phpt, twin and differential tests"
	@echo "make bench      benchmarks, written to BENCHMARKS.md"
	@echo "make chaos DURATION=10m [SEED=N]   3-member etcd, 3 nodes, load, writer, nemesis; figures in target/test-logs/chaos/chaos.md"
	@echo "make deb        Debian 13 packages with cargo-deb into target/debian/ (packaging/README.md)"
	@echo "make install    copy dw_router.so into php-config --extension-dir, write a conf.d ini"
	@echo "make stubs      print the API as Reflection sees it and check stubs/dw_router.stub.php against it"
	@echo "make lint       cargo fmt --check, no import loop or folder circle in a crate, layers and names kept (scripts/check-modules), clippy -D warnings"
	@echo "make check-zts  build a thread-safe PHP 8.4 from Debian's source (cached) and check the extension compiles and loads into it"

# The root, then (for 8.4) lsphp built in it from Debian's PHP 8.4 sources (cached; seconds
# when done).
devenv:
	@$(DEVENV) setup
ifeq ($(PHP),8.4)
	@scripts/build-lsphp
endif

# Crates are fetched on the host: the devenv root's TLS trust differs from the host's.
fetch:
	@$(CARGO) fetch --locked 2>/dev/null || $(CARGO) fetch
	@$(CARGO) fetch --manifest-path fuzz/Cargo.toml

# The host tools only some targets use, installed by those targets (scripts/host-tool), not
# by `make build` or `make demo`: cargo-fuzz for the fuzz run of `make test`, cargo-deb for
# `make deb` and the packages' install test. The devenv binds ~/.cargo, so they run inside.
tools-test:
	@scripts/host-tool cargo-fuzz
	@scripts/host-tool cargo-deb

build: devenv fetch
	$(IN_ENV) $(BUILD)

# For 8.4 (what CI runs): every suite, then the phpt suite on PHP 8.5, one total line.
ifeq ($(PHP),8.4)
test: build tools-test
	@scripts/test-all
else
test: build
	@$(IN_ENV) scripts/run-tests
endif

bench: build
	@$(IN_ENV) scripts/run-bench

# The chaos test (tests/chaos/run): a 3-member etcd, three nodes, load, a dwctl writer and
# a nemesis on a seeded schedule; every answer checked against the userland twin. Its
# figures, as Markdown, end the output and are kept in target/test-logs/chaos/chaos.md.
DURATION ?= 10m
chaos: build
	@$(IN_ENV) tests/chaos/run --duration $(DURATION) $(if $(SEED),--seed $(SEED))

# The packages (cargo-deb; packaging/README.md), with php8.5-dw-router when the 8.5 root
# is there. Builds for 8.4 first; PHP=8.5 make build beforehand adds the 8.5 package.
deb: build
	@scripts/make-deb

install: build
	$(IN_ENV) scripts/install-extension $(SO)

# The stub is written by hand (with docblocks); this checks it against Reflection and
# prints what Reflection sees, to copy from when the API changes. PHP's run-tests.php is
# found from php-config (scripts/lib/php-run-tests.sh): its directory names the module API.
stubs: build
	$(IN_ENV) php -d extension=$(CURDIR)/$(SO) scripts/gen-stub.php
	@NO_INTERACTION=1 $(IN_ENV) bash -c '. scripts/lib/php-run-tests.sh && run_tests=$$(php_run_tests_script) && \
	  php "$$run_tests" -q -p "$$(command -v php)" -d extension=$(CURDIR)/$(SO) tests/phpt/074-stub-reflection.phpt' | \
	  grep -E '^(PASS|FAIL)'

# Debian ships no ZTS PHP; this builds one (about 7 minutes once, then cached outside the
# repository) and builds and loads the extension against it. Not part of make test.
check-zts: devenv fetch
	scripts/check-zts

fmt:
	$(CARGO) fmt --all

lint: devenv fetch
	$(CARGO) fmt --all --check
	scripts/check-modules src crates/*/src
	scripts/check-docs
	$(IN_ENV) $(CARGO) clippy --offline --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean

# dw-router, the PHP-extension way: `make`, `make test`, `make install`.
# Everything runs inside the development environment (scripts/devenv): PHP 8.4, etcd,
# php-fpm, nginx. `make` provisions it on first use.

DEVENV   := scripts/devenv
IN_ENV   := $(DEVENV) exec --
CARGO    := cargo
SO       := target/release/libdw_router.so

# The whole stack (etcd, dw-agent, php-fpm with the extension, nginx), started and stopped
# inside one devenv run; `make up` leaves it running in target/stack/, `make down` stops it.
demo: build
	@$(IN_ENV) scripts/demo

up: build
	@scripts/stack up

down:
	@scripts/stack down

.PHONY: all demo up down build devenv fetch test test-rust test-php bench install stubs check-zts fmt lint clean help

all: build

help:
	@echo "make demo       build, run the whole stack (etcd, dw-agent, php-fpm, nginx), route, drain, restore"
	@echo "make up / down  start the stack and leave it running (prints the URL) / stop it"
	@echo "make            build the extension (target/release/libdw_router.so) and binaries"
	@echo "make test       every test suite; ends with 'N passed, N failed'"
	@echo "make bench      benchmarks, written to BENCHMARKS.md"
	@echo "make install    copy dw_router.so into php-config --extension-dir, write a conf.d ini"
	@echo "make stubs      print the API as Reflection sees it and check stubs/dw_router.stub.php against it"
	@echo "make lint       cargo fmt --check and clippy -D warnings"
	@echo "make check-zts  build a thread-safe PHP 8.4 from Debian's source (cached) and check the extension compiles and loads into it"

# The root, then lsphp 8.4 built in it from Debian's PHP sources (cached; seconds when done).
devenv:
	@$(DEVENV) setup
	@scripts/build-lsphp

# Crates are fetched on the host: the devenv root's TLS trust differs from the host's.
fetch:
	@$(CARGO) fetch --locked 2>/dev/null || $(CARGO) fetch
	@$(CARGO) fetch --manifest-path fuzz/Cargo.toml
	@command -v cargo-fuzz >/dev/null 2>&1 || $(CARGO) install --locked cargo-fuzz

build: devenv fetch
	$(IN_ENV) $(CARGO) build --offline --release --workspace --bins --lib

test: build
	@$(IN_ENV) scripts/run-tests

bench: build
	@$(IN_ENV) scripts/run-bench

install: build
	$(IN_ENV) scripts/install-extension $(SO)

# The stub is written by hand (with docblocks); this checks it against Reflection and
# prints what Reflection sees, to copy from when the API changes.
stubs: build
	$(IN_ENV) php -d extension=$(CURDIR)/$(SO) scripts/gen-stub.php
	@NO_INTERACTION=1 $(IN_ENV) php /usr/lib/php/20240924/build/run-tests.php -q -p /usr/bin/php -d extension=$(CURDIR)/$(SO) tests/phpt/074-stub-reflection.phpt | grep -E '^(PASS|FAIL)'

# Debian ships no ZTS PHP; this builds one (about 7 minutes once, then cached outside the
# repository) and builds and loads the extension against it. Not part of make test.
check-zts: devenv fetch
	scripts/check-zts

fmt:
	$(CARGO) fmt --all

lint: devenv fetch
	$(CARGO) fmt --all --check
	$(IN_ENV) $(CARGO) clippy --offline --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean

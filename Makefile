# segfs build, test and demo entry points. `make test` is what CI runs.

GO                ?= go
BIN               := $(CURDIR)/bin
VERSITYGW_VERSION := v1.8.0
VERSITYGW_MODULE  := github.com/versity/versitygw
SEGFS             := $(BIN)/segfs
VERSITYGW         := $(BIN)/versitygw

# The e2e tests and the demo find the binaries through these; with
# SEGFS_REQUIRE_E2E set a missing binary fails the tests instead of
# skipping them.
export SEGFS_BIN         := $(SEGFS)
export VERSITYGW_BIN     := $(VERSITYGW)
export SEGFS_REQUIRE_E2E := 1

.PHONY: all deps base-deps versitygw fuse3 lucene nfpm pkgtools gomod build test fuzz-short demo clean distclean install uninstall package

# The version every build carries (`segfs --version`) and the packages
# too, from the commit checked out: 0.1.0+git<commit time, UTC>.<commit>.
# SOURCE_DATE_EPOCH, the commit's time, is the time of every file the
# packages hold, so two builds of one commit give the same packages.
SEGFS_VERSION     ?= $(shell TZ=UTC git log -1 --format='0.1.0+git%cd.%h' --date=format-local:%Y%m%d%H%M%S 2>/dev/null || echo 0.1.0)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH
NFPM_VERSION      := v2.48.0
NFPM              := $(BIN)/nfpm
PKGDIR            := $(BIN)/pkg

all: build

deps: versitygw fuse3 lucene gomod

# What the demo and the soak need: no Lucene.
base-deps: versitygw fuse3 gomod

# versitygw prints "git" as its version when built by go install, so the
# module version is read from the binary's build info instead.
versitygw:
	@if [ -x "$(VERSITYGW)" ] && $(GO) version -m "$(VERSITYGW)" 2>/dev/null | \
		grep -Eq '^[[:space:]]+mod[[:space:]]+$(VERSITYGW_MODULE)[[:space:]]+$(VERSITYGW_VERSION)([[:space:]]|$$)'; then \
		echo "versitygw $(VERSITYGW_VERSION): present in bin/"; \
	else \
		echo "versitygw $(VERSITYGW_VERSION): installing into bin/ (takes a few minutes)"; \
		GOBIN="$(BIN)" $(GO) install $(VERSITYGW_MODULE)/cmd/versitygw@$(VERSITYGW_VERSION); \
	fi

fuse3:
	@if command -v fusermount3 >/dev/null 2>&1; then \
		echo "fuse3: present"; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "fuse3: installing with apt-get"; \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y fuse3; } || \
			echo "fuse3: apt-get failed; as root segfs mounts directly and does not need fusermount3" >&2; \
	else \
		echo "fuse3 is missing; install it with: sudo apt-get update && sudo apt-get install -y fuse3" >&2; \
		exit 1; \
	fi

# The e2e tests and the benchmark drive the real Lucene: Debian's Lucene 8
# on a JRE (tests/lucene/LuceneTool.java runs as a source program, so no
# JDK is needed). Found where tests/harness/lucene.go looks for it. Unlike
# fuse3 it cannot be done without: with SEGFS_REQUIRE_E2E a missing
# Lucene fails the tests, so a failed install fails here.
LUCENE_JARS := /usr/share/java/lucene-core-8*.jar /usr/share/java/lucene-core.jar
lucene:
	@jar=$$(ls $(LUCENE_JARS) 2>/dev/null | tail -n 1); \
	if command -v java >/dev/null 2>&1 && [ -n "$$jar" ]; then \
		echo "lucene: present ($$jar)"; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "lucene: installing default-jre-headless liblucene8-java with apt-get"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y default-jre-headless liblucene8-java; \
	else \
		echo "lucene is missing; install it with: sudo apt-get update && sudo apt-get install -y default-jre-headless liblucene8-java" >&2; \
		exit 1; \
	fi

# nfpm, the packager (pinned, built into bin/ like versitygw).
nfpm:
	@if [ -x "$(NFPM)" ] && $(GO) version -m "$(NFPM)" 2>/dev/null | grep -q 'mod[[:space:]]*github.com/goreleaser/nfpm/v2[[:space:]]*$(NFPM_VERSION)'; then \
		echo "nfpm $(NFPM_VERSION): present in bin/"; \
	else \
		echo "nfpm $(NFPM_VERSION): installing into bin/"; \
		GOBIN="$(BIN)" $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION); \
	fi

# What the package tests use besides nfpm: rpm to read the .rpm, the
# shells whose completion scripts they parse, and systemd-analyze to
# verify the unit; each as COMMAND:DEBIAN_PACKAGE.
PKG_TOOLS := rpm:rpm zsh:zsh fish:fish systemd-analyze:systemd
pkgtools: nfpm
	@missing=$$(for t in $(PKG_TOOLS); do command -v $${t%%:*} >/dev/null 2>&1 || echo $${t#*:}; done); \
	if [ -z "$$missing" ]; then \
		echo "rpm, zsh, fish, systemd-analyze: present"; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing with apt-get:" $$missing; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	else \
		echo "missing; install with: sudo apt-get install -y" $$missing >&2; \
		exit 1; \
	fi

gomod:
	$(GO) mod download

# -trimpath and an empty build ID: the binary holds no path of this
# machine and is the same for the same commit and Go.
build:
	$(GO) build -trimpath -buildvcs=auto -ldflags '-X main.stamp=$(SEGFS_VERSION) -buildid=' -o $(SEGFS) ./cmd/segfs

# make build && sudo make install [PREFIX=/usr/local] [DESTDIR=]: the
# binary bin/segfs holds (install builds nothing: as root, Go may not be
# on the PATH and git may refuse another user's checkout), the systemd
# unit (ExecStart at this PREFIX), its example environment file, the man
# page, the completions and the docs, each where its tool looks.
# mount(8)'s helper finds segfs on the default PATH, which holds
# PREFIX/bin for /usr and /usr/local. make uninstall removes them.
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
UNITDIR     ?= $(PREFIX)/lib/systemd/system
MANDIR      ?= $(PREFIX)/share/man
DOCDIR      ?= $(PREFIX)/share/doc/segfs
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
MAN_DATE    := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%d 2>/dev/null)
INSTALLED   := $(BINDIR)/segfs $(UNITDIR)/segfs@.service $(MANDIR)/man8/segfs.8.gz \
	$(BASHCOMPDIR)/segfs $(ZSHCOMPDIR)/_segfs $(FISHCOMPDIR)/segfs.fish \
	$(DOCDIR)/README.md $(DOCDIR)/USAGE.md $(DOCDIR)/examples/segfs.env.example
install:
	@test -x $(SEGFS) || { echo "$(SEGFS) is not built: run make build first" >&2; exit 1; }
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DOCDIR)/examples \
		$(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 0755 $(SEGFS) $(DESTDIR)$(BINDIR)/segfs
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' dist/segfs@.service.in > $(DESTDIR)$(UNITDIR)/segfs@.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/segfs@.service
	install -m 0644 dist/segfs.env.example $(DESTDIR)$(DOCDIR)/examples/segfs.env.example
	install -m 0644 README.md docs/USAGE.md $(DESTDIR)$(DOCDIR)/
	$(SEGFS) man --date=$(MAN_DATE) > $(DESTDIR)$(MANDIR)/man8/segfs.8
	gzip -n -9 -f $(DESTDIR)$(MANDIR)/man8/segfs.8
	$(SEGFS) completion bash > $(DESTDIR)$(BASHCOMPDIR)/segfs
	$(SEGFS) completion zsh > $(DESTDIR)$(ZSHCOMPDIR)/_segfs
	$(SEGFS) completion fish > $(DESTDIR)$(FISHCOMPDIR)/segfs.fish
	chmod 0644 $(DESTDIR)$(MANDIR)/man8/segfs.8.gz $(DESTDIR)$(BASHCOMPDIR)/segfs $(DESTDIR)$(ZSHCOMPDIR)/_segfs $(DESTDIR)$(FISHCOMPDIR)/segfs.fish
	touch -h -d @$(SOURCE_DATE_EPOCH) $(addprefix $(DESTDIR),$(INSTALLED))

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) 2>/dev/null

# make package: a .deb and an .rpm in bin/pkg/, from `make install` into
# a staging tree with the paths of a distribution's package (/usr, the
# unit in /usr/lib/systemd/system, zsh's vendor completions), packed by
# nfpm (dist/nfpm.yaml).
PKG_STAGE := $(BIN)/pkg-stage
package: nfpm build
	rm -rf $(PKG_STAGE) $(PKGDIR)
	$(MAKE) --no-print-directory install DESTDIR=$(PKG_STAGE) PREFIX=/usr UNITDIR=/usr/lib/systemd/system \
		ZSHCOMPDIR=/usr/share/zsh/vendor-completions
	mkdir -p $(PKGDIR) $(PKG_STAGE)/.pkg
	install -m 0755 dist/pkg/preremove.sh dist/pkg/daemon-reload.sh $(PKG_STAGE)/.pkg/
	touch -d @$(SOURCE_DATE_EPOCH) $(PKG_STAGE)/.pkg/*
	cd $(PKG_STAGE) && for p in deb rpm; do \
		SEGFS_VERSION=$(SEGFS_VERSION) GOARCH=$$($(GO) env GOARCH) $(NFPM) package --config $(CURDIR)/dist/nfpm.yaml --packager $$p --target $(PKGDIR)/ || exit 1; \
	done

# The packages' own unit tests run in parallel; the end-to-end, fault and
# resource tests under tests/ one package at a time: they mount, run
# servers and bound threads, goroutines and memory, and two such packages
# at once on two CPUs make those bounds measure each other's load.
# The packages' tests (tests/e2e/package_test.go) find the .deb and the
# .rpm here.
export SEGFS_PKG_DIR := $(PKGDIR)

test: deps pkgtools build package
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -v /tests/)
	$(GO) test -race -count=1 -timeout 30m -p 1 ./tests/...
	$(MAKE) --no-print-directory fuzz-short

# A short run of every fuzzer in the packages that parse untrusted bytes
# (found by name, so a new one is included), each for a fixed number of
# executions: a count, not a time, so a loaded machine makes the run
# slower but never fails it with a deadline. A few seconds in all on an
# idle machine. New interesting inputs go to the Go cache; a failing one
# is written under the package's testdata/fuzz/ and fails the run.
FUZZ_EXECS ?= 20000
FUZZ_PKGS ?= ./compress/ ./lucene/ ./layout/ ./smile/ ./snapshot/
fuzz-short:
	@set -e; for p in $(FUZZ_PKGS); do \
		for f in $$($(GO) test -list '^Fuzz' $$p | grep '^Fuzz'); do \
			echo "fuzz $$p $$f: $(FUZZ_EXECS) executions"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZ_EXECS)x $$p; \
		done; \
	done

demo: base-deps build
	$(GO) run ./tests/demo

# clean keeps bin/versitygw, a pinned dependency that takes minutes to
# build; distclean removes it too.
clean:
	rm -rf $(SEGFS) $(PKGDIR) $(PKG_STAGE) .cache

distclean: clean
	rm -rf $(BIN)

# Benchmarks, not run in CI: segfs and its baselines in one run, through a
# shaped remote (the bench's own proxy in front of versitygw). Extra flags go in
# BENCH_FLAGS, e.g. make bench BENCH_FLAGS='--profile loopback --keep-going'.
.PHONY: bench bench-quick
bench: deps build
	$(GO) run ./tests/bench $(BENCH_FLAGS)

bench-quick: deps build
	$(GO) run ./tests/bench --quick $(BENCH_FLAGS)

# A bounded soak, not run in CI: a mixed workload through the shaped remote
# with faults injected at a steady rate, every byte checked, leaks checked
# at the end. Ten minutes unless SOAK_FLAGS says otherwise, e.g.
# make soak SOAK_FLAGS='--duration 2m'. The fault cases themselves run in
# make test (tests/reliability).
.PHONY: soak
soak: base-deps build
	$(GO) run ./tests/soak $(SOAK_FLAGS)

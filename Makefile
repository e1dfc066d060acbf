# usb4verbs. `make test` and `make demo` install what they need (scripts/deps.sh);
# every download is cached under .cache/.
SHELL := /bin/bash
CACHE := $(CURDIR)/.cache
export CACHE
export GOMODCACHE := $(CACHE)/gomod
export GOFLAGS := -modcacherw -buildvcs=false
export PATH := $(CACHE)/bin:$(PATH)
# cgo packages include headers from other directories, which Go's build cache does not
# key on: their hash goes into CGO_CFLAGS, which it does (scripts/cgo-headers.sh).
export CGO_CFLAGS := $(or $(CGO_CFLAGS),-O2 -g) $(shell scripts/cgo-headers.sh)

BUILD := build
# Packages whose tests need a real RDMA kernel; `make vmtest` builds their test
# binaries on the host and runs them inside the VM (tests/vm).
VM_TEST_PKGS := ./tests/vm/selftest ./rdmanl ./provider ./provider/dataplane ./cmd/ibvinfo

.PHONY: all build deps lint unittest vmtest test demo bench bench-docs docs package clean
all: build

# The provider users install (the C front library libusb4_rdma.so and the Go part
# libusb4_rdma-go.so beside it), and the diagnostics CLI. Go's build cache makes
# re-running these cheap, so they are always invoked.
build:
	@mkdir -p $(BUILD)
	go build ./...
	scripts/build-provider.sh $(BUILD)
	go build -o $(BUILD)/ibvinfo ./cmd/ibvinfo

deps:
	@scripts/deps.sh

lint: deps
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard "*.go")); test -z "$$out" || { echo "$$out"; exit 1; }
	go vet ./...
	go vet -tags usb4front ./cshim/gopart
	staticcheck ./...
	staticcheck -tags usb4front ./cshim/gopart

unittest: deps
	go test -count=1 ./...

# Builds the VM test binaries, then boots the kernel and runs them (tests/vm/README.md).
vmtest: deps
	@rm -rf $(BUILD)/vm/bin; mkdir -p $(BUILD)/vm/bin
	@for p in $(VM_TEST_PKGS); do \
	  [ -d $$p ] || continue; \
	  go test -c -o $(BUILD)/vm/bin/$$(basename $$p).test $$p || exit 1; \
	done
	tests/vm/run.sh $(BUILD)/vm/bin/*.test

test:
	@scripts/test.sh

# Boots the VM and shows stock tools running through libusb4_rdma on Soft-RoCE.
demo: deps build
	@scripts/demo.sh

# deb, rpm, Arch package and tarball under build/pkg (packaging/README.md).
package: deps build
	@packaging/build.sh

# Benchmarks: Go micro-benchmarks on the host, then ours vs librxe in one VM boot.
# Output under build/bench only; bench-docs promotes those results to
# tests/bench/results and regenerates docs/benchmarks.md.
bench: deps build
	@scripts/bench.sh

bench-docs:
	@scripts/bench.sh docs

# The committed stock-tool and reliability docs, from the outputs the last
# `make test` (or tests/stock, tests/reliability runs) left under build/.
docs:
	@scripts/docs.sh

clean:
	rm -rf $(BUILD)

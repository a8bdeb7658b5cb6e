# wsl-gpu-hook: see README.md. Targets that run containers need root.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN     := bin
LDFLAGS := -s -w -X main.version=$(VERSION)
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: all build build-all test-arm64 tools setup demo test unit e2e lint bench bench-start fuzz clean deb rpm apk packages packages-test release engines k8s image

all: build

## build: the static binaries (no cgo): bin/wsl-gpu-hook (what engines run on every
## container start), bin/wsl-gpu-ctl (info, doctor, cdi, install) and the kubelet
## device plugin, bin/wsl-gpu-device-plugin, and the DRA driver, bin/wsl-gpu-dra-driver
## (separate binaries: gRPC and the API client stay out of the hook).
## GOARCH=amd64|arm64 picks the architecture (default: this machine's); every build
## lands in $(BIN)/linux-$(GOARCH)/ (the path packages take), and this machine's
## architecture is also linked at $(BIN)/<name>, where the tests and demos look.
## build-all: both architectures.
ARCHES   := amd64 arm64
HOSTARCH := $(shell $(GO) env GOHOSTARCH)
GOARCH   ?= $(HOSTARCH)
CMDS     := wsl-gpu-hook wsl-gpu-ctl wsl-gpu-device-plugin wsl-gpu-dra-driver
build:
	@case " $(ARCHES) " in *" $(GOARCH) "*) ;; *) echo "build: GOARCH=$(GOARCH) is not built: want one of $(ARCHES)" >&2; exit 1;; esac
	for c in $(CMDS); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/linux-$(GOARCH)/$$c ./cmd/$$c || exit 1; \
		if [ "$(GOARCH)" = "$(HOSTARCH)" ]; then ln -f $(BIN)/linux-$(GOARCH)/$$c $(BIN)/$$c || exit 1; fi; \
	done

build-all:
	for a in $(ARCHES); do $(MAKE) --no-print-directory build GOARCH=$$a || exit 1; done

## image: the device plugin's OCI image, $(BIN)/wsl-gpu-hook-image.tar, tagged $(IMAGE):
## an image index with an amd64 and an arm64 image, each the four static binaries of
## its architecture, no shell, USER 65532 (the chart runs the plugin as root: the
## kubelet's plugin dir is root's). No registry, no network, no daemon (hack/ociimage);
## `ctr -n k8s.io images import`, `podman load` and `kind load image-archive` take the
## index and unpack the machine's own architecture; `docker load` without the
## containerd image store reads only manifest.json, which names this machine's
## architecture (listed first).
IMAGE ?= localhost/wsl-gpu-hook:$(VERSION)
IMAGE_ARCHES := $(HOSTARCH) $(filter-out $(HOSTARCH),$(ARCHES))
image: build-all
	$(GO) run ./hack/ociimage --out $(BIN)/wsl-gpu-hook-image.tar --tag $(IMAGE) \
		$(foreach a,$(IMAGE_ARCHES),--arch $(a)) \
		--add '$(BIN)/linux-{arch}/wsl-gpu-device-plugin:/usr/bin/wsl-gpu-device-plugin:0755' \
		--add '$(BIN)/linux-{arch}/wsl-gpu-dra-driver:/usr/bin/wsl-gpu-dra-driver:0755' \
		--add '$(BIN)/linux-{arch}/wsl-gpu-ctl:/usr/bin/wsl-gpu-ctl:0755' \
		--add '$(BIN)/linux-{arch}/wsl-gpu-hook:/usr/bin/wsl-gpu-hook:0755' \
		--mkdir /tmp:1777 --entrypoint /usr/bin/wsl-gpu-device-plugin --user 65532:65532 --env PATH=/usr/bin \
		--label org.opencontainers.image.title=wsl-gpu-hook \
		--label "org.opencontainers.image.description=WSL2 GPU device plugin, CDI generator and OCI hook" \
		--label org.opencontainers.image.version=$(VERSION) \
		--label org.opencontainers.image.revision=$$(git rev-parse HEAD 2>/dev/null || echo unknown) \
		--label org.opencontainers.image.source=https://github.com/wsl-gpu-hook/wsl-gpu-hook \
		--label org.opencontainers.image.licenses=Apache-2.0
	@echo "image: $(BIN)/wsl-gpu-hook-image.tar ($(IMAGE), $(IMAGE_ARCHES))"

## tools: the test-only simulator and fixture generator (never shipped)
tools:
	$(GO) build -o $(BIN)/dxgsim ./test/dxgsim
	$(GO) build -o $(BIN)/wslfixture ./test/fixture/cmd/wslfixture

setup:
	./hack/setup.sh

## demo: a container on the simulated NVIDIA laptop host, through runc + the hook
demo: setup build tools
	./hack/demo.sh

# TESTMODS are test modules of their own (heavy test-only dependencies
# stay out of the main go.mod); they test this checkout through a replace.
# hack/release (the packager, nfpm's and cyclonedx-gomod's dependencies)
# is vetted and tested with them.
TESTMODS := test/engines test/latencyfs hack/release

## engines: the engine matrix's engines (runc, containerd, dockerd from their
## Go modules; runc also static, for the simulated Rancher Desktop), the Debian
## 13 root and the Alpine-like root of Rancher Desktop's distro, built once into
## /var/cache/wsl-gpu-hook-e2e (the roots download while the engines compile).
## BUILD_TOOLS are the build test's (the labs Dockerfile frontend,
## distribution's registry, buildx, buildkitd): make test builds them in the
## background, test/engines waits on their lock.
BUILD_TOOLS := dockerfile-frontend registry buildx buildkitd
engines: setup
	{ ./hack/engines/root.sh trixie && ./hack/engines/root.sh rancher-alpine; } >/dev/null & root=$$!; \
	./hack/engines/build.sh runc runc-static containerd dockerd >/dev/null; built=$$?; \
	wait $$root && exit $$built

## test: everything CI runs: lint, unit, integration and end-to-end tests,
## the privileged ones included (test/privileged: they mount, mknod, load BPF),
## and the arm64 unit tests under qemu-user (test-arm64)
test: export WSL_GPU_HOOK_PRIVILEGED := 1
test: setup lint engines
	@# Kubernetes builds while the other tests run (they wait on I/O and
	@# containers half the time); make k8s's call waits on its lock.
	@# Starting it before the engine builds gained nothing measurable: a
	@# cold run is CPU-bound on 2 cores either way (59:58 against 59:04).
	@# The build test's tools first: test/engines, which needs them, runs
	@# before make k8s.
	mkdir -p $(BIN) && { nice -n 5 sh -c './hack/engines/build.sh $(BUILD_TOOLS) >/dev/null; ./hack/kube/build.sh kube cni prometheus release kind && ./hack/engines/root.sh kind-base' >/dev/null 2>$(BIN)/kube-build.log & }
	$(GO) test -count=1 -timeout 40m ./...
	for m in $(TESTMODS); do (cd $$m && $(GO) test -count=1 -timeout 40m ./...) || exit 1; done
	$(MAKE) test-arm64
	$(MAKE) k8s
	@# 100,000 inputs a target (31 targets): the cold run needs the minutes.
	./hack/fuzz.sh 100000x

## k8s: `make image` + the Helm chart on a real v1.37.2 cluster (test/k8s, a module
## of its own): API server, scheduler, controller manager, etcd, and nodes that each
## run a kubelet and containerd 2.4 on a simulated WSL host: TestK8s runs docs/kubernetes.md's
## block, the device plugin's and the DRA driver's suites on one 4-node cluster, and
## TestTwoNodes the harness itself; TestK3sNode the chart on a k3s-shaped node across a
## reboot (about 70 s, beside TestK8s). TestKind runs kind v0.33 itself, through Docker 29
## and through podman, with docs/kubernetes.md's kind and chart blocks. The first run
## builds Kubernetes, etcd, helm and kind's tools (hack/kube/build.sh) and kind's node
## image (hack/kind/node-image.sh) into the e2e cache.
k8s:
	cd test/k8s && $(GO) vet ./... && $(GO) test -count=1 -timeout 60m ./...

## test-arm64: the unit tests of what runs on an arm64 (Windows on Arm) host, built
## for arm64 and run under qemu-user (QEMU_ARM64, Debian's qemu-user-static; go test
## -exec, so binfmt_misc is not needed): every package wsl-gpu-hook links (what each
## container start runs) and cdispec and gpustats (cdi generate, info, top). The
## Kubernetes packages stay out: their arm64 build is most of the cold cost and
## their code has nothing architecture-specific. qemu-user refuses the dxg ioctl
## numbers (ENOSYS, "Unsupported ioctl"): dxcore's wire test checks the arm64
## device code byte for byte against amd64's instead. Tests that need what qemu keeps
## from the kernel (openat2 in qemu 7.2, a test binary started again), or compare with
## the host's ldconfig and gcc-built libraries (the host machine's), skip, saying so
## (test/emulated); privileged tests (mounts, BPF) run natively only. `make image`
## builds all four binaries for arm64, so every command compiles for it too; -trimpath
## as there, so both compile the arm64 standard library and shared packages once.
QEMU_ARM64 ?= qemu-aarch64-static
ARM64_PKGS = $(shell $(GO) list -deps ./cmd/wsl-gpu-hook | sed -n 's|^github.com/wsl-gpu-hook/wsl-gpu-hook/|./|p') ./pkg/setup/cdispec ./pkg/usage/gpustats
test-arm64:
	@command -v $(QEMU_ARM64) >/dev/null || { echo "test-arm64: $(QEMU_ARM64) is not installed: apt-get install qemu-user-static" >&2; exit 1; }
	CGO_ENABLED=0 GOARCH=arm64 WSL_GPU_HOOK_TEST_EMULATOR=$(QEMU_ARM64) WSL_GPU_HOOK_PRIVILEGED= $(GO) test -trimpath -count=1 -short -exec $(QEMU_ARM64) ./test/emulated $(ARM64_PKGS)

## unit: the tests any user can run: no root, no daemons, no containers; the
## same tests as root, which touch nothing on the machine (privileged ones skip)
unit:
	$(GO) test -count=1 -short $$($(GO) list ./... | grep -v '/test/e2e$$')

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...
	for m in $(TESTMODS); do (cd $$m && $(GO) vet ./...) || exit 1; done

## bench: benchmarks of the hook's phases and a whole hook run
bench: setup
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./pkg/... ./cmd/... ./test/e2e/...

## bench-start: container start with the hook vs plain runc vs NVIDIA's CDI shape (root; RUNS=21)
bench-start:
	./hack/bench-start.sh

## fuzz: each fuzz target for FUZZTIME (default 60s)
FUZZTIME ?= 60s
fuzz:
	./hack/fuzz.sh $(FUZZTIME)

## deb, rpm, apk: one package for ARCH (amd64, the default, or arm64) in $(BIN)/:
## wsl-gpu-hook_<version>_<arch>.deb, wsl-gpu-hook-<version>-1.<arch>.rpm,
## wsl-gpu-hook_<version>-r0_<arch>.apk, from the one description
## packaging/nfpm.yaml (hack/packages.sh; packaging/README.md)
ARCH   ?= amd64
deb rpm apk:
	./hack/packages.sh $(BIN) $(ARCH) $@

## packages: the deb, rpm and apk for each of ARCHES
packages:
	for a in $(ARCHES); do ./hack/packages.sh $(BIN) $$a || exit 1; done

## packages-test: lintian and rpmlint; the deb installed, upgraded, removed and purged in
## Debian 12 and 13 roots, the rpm in Fedora-layout roots, the apk read (root)
packages-test:
	$(GO) test -count=1 -timeout 30m ./test/packages/

## release: everything a release ships into $(BIN)/release (hack/release.sh), offline and
## reproducibly: per arch of ARCHES a tarball, deb, rpm and apk; the image archive, the
## chart (its appVersion the image's tag), a CycloneDX SBOM per artifact, CHANGELOG.md
## and SHA256SUMS. A tree with uncommitted changes is refused (ALLOW_DIRTY=1).
release:
	rm -rf $(BIN)/release
	ARCHES="$(ARCHES)" ./hack/release.sh $(BIN)/release

clean:
	rm -rf $(BIN)

# Convenience targets; scripts/ holds the real commands.
.PHONY: wasm wasm-check check test image build

# Rebuild every example handler's committed .wasm (deterministic).
wasm:
	bash scripts/build-wasm.sh

# Fail if a committed .wasm differs from a fresh build.
wasm-check:
	bash scripts/build-wasm.sh --check

# The fast loop: gofmt, vet, staticcheck, unit tests in -short mode without -race and
# without toolchain installs; prints its time. `make test` is the full check CI runs.
check:
	bash scripts/check.sh

test:
	bash scripts/test.sh

# Build the OCI image into dist/image without a container daemon (reproducible; docs/deploy.md).
image:
	bash scripts/build-image.sh

# Build ./wqhost with the checkout's commit stamped (wqhost version, /v1/status,
# wqhost_build_info), even where GOFLAGS holds -buildvcs=false.
build:
	go build -buildvcs=true -o wqhost ./cmd/wqhost

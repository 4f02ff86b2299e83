# Convenience targets; scripts/ holds the real commands.
.PHONY: wasm wasm-check test image

# Rebuild every example handler's committed .wasm (deterministic).
wasm:
	bash scripts/build-wasm.sh

# Fail if a committed .wasm differs from a fresh build.
wasm-check:
	bash scripts/build-wasm.sh --check

test:
	bash scripts/test.sh

# Build the OCI image into dist/image without a container daemon (reproducible; docs/deploy.md).
image:
	bash scripts/build-image.sh

#!/usr/bin/env bash
# Builds wqhost's OCI image from this checkout, offline and without a container daemon
# (deploy/cmd/build-image: go-containerregistry appends one layer to an empty base), into the
# OCI image layout dist/image. Reproducible: one commit gives one digest (SOURCE_DATE_EPOCH,
# default 0, sets the creation time).
# Usage: bash scripts/build-image.sh [-name wqhost:TAG] [-arch arm64] [-version v1.2.3] [-o DIR]
# Then: podman pull oci:dist/image:wqhost:dev, or skopeo copy oci:dist/image:wqhost:dev docker://REGISTRY/wqhost:TAG
set -euo pipefail
cd "$(dirname "$0")/.."
tool=$(mktemp -d)
trap 'rm -rf "$tool"' EXIT
GOFLAGS= go build -C deploy -o "$tool/build-image" ./cmd/build-image
"$tool/build-image" -module . -o dist/image "$@"

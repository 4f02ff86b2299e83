#!/usr/bin/env bash
# Builds wqhost's OCI image from this checkout, offline and without a container daemon
# (deploy/cmd/build-image: go-containerregistry appends one layer to an empty base), into the
# OCI image layout dist/image. Reproducible: one commit gives one digest (SOURCE_DATE_EPOCH,
# default 0, sets the creation time).
# Also writes dist/image.tar, a docker-archive tagged -name and wqhost:<version> (the version
# defaults to git describe --tags --always --dirty; the binary reports it and the commit).
# Usage: bash scripts/build-image.sh [-name wqhost:TAG] [-arch arm64] [-version v1.2.3] [-o DIR] [-tar FILE]
# Then: podman load -i dist/image.tar (localhost/wqhost:<version>), or
# skopeo copy oci:dist/image:wqhost:dev docker://REGISTRY/wqhost:TAG
set -euo pipefail
cd "$(dirname "$0")/.."
tool=$(mktemp -d)
trap 'rm -rf "$tool"' EXIT
GOFLAGS= go build -C deploy -o "$tool/build-image" ./cmd/build-image
"$tool/build-image" -module . -o dist/image "$@"

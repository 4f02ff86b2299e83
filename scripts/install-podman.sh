#!/usr/bin/env bash
# Installs what the image test (deploy/image, TestImageRunsUnderPodman) needs to run the built
# image: Debian's podman and runc, and a containers.conf that lets podman run where this
# project's CI runs (a container with hybrid cgroups, no systemd): the runc runtime, the
# cgroupfs cgroup manager, no default ulimits (raising them is refused there) and a file
# events log (no journald). Idempotent; as root on Debian only: anywhere else it says why it
# does nothing, and the image test then skips naming the missing podman.
# Usage: bash scripts/install-podman.sh   (scripts/test.sh calls it)
set -euo pipefail

conf=/etc/containers/containers.conf
marker="# wqhost: scripts/install-podman.sh"

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "install-podman: not root on Debian; leaving podman as it is ($(command -v podman || echo 'not installed'))"
	exit 0
fi
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
	echo "install-podman: apt-get install podman runc"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends podman runc >/dev/null ||
		{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends podman runc >/dev/null; }
fi
if ! grep -qF "$marker" "$conf" 2>/dev/null; then
	mkdir -p "$(dirname "$conf")"
	if [ -s "$conf" ]; then
		cp "$conf" "$conf.before-wqhost"
	fi
	cat >"$conf" <<CONF
$marker
# Measured on the CI machine (hybrid cgroups, no systemd): crun and the systemd cgroup
# manager fail there, and so does setting the default ulimits.
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
	echo "install-podman: wrote $conf"
fi
podman --version

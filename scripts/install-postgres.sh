#!/usr/bin/env bash
# Installs what the bench module's River on PostgreSQL drain (bench/internal/drain,
# BenchmarkDrain) runs: Debian's postgresql, whose initdb and postgres the benchmark runs
# itself as a throwaway cluster (a temporary directory, a loopback port, the postgres user
# when run as root). No cluster of the package's own is created or started. Idempotent; as
# root on Debian only: anywhere else it says why it does nothing, and the drain then skips
# River on PostgreSQL naming why (outside CI; in CI, CI=true, it fails).
# Usage: bash scripts/install-postgres.sh   (scripts/test.sh calls it)
set -euo pipefail

found() {
	local p
	p=$(command -v initdb 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)
	[ -n "$p" ] && [ -x "$p" ] && echo "$p"
}

if p=$(found); then
	echo "install-postgres: $p is installed"
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "install-postgres: not root on Debian; no PostgreSQL installed (River on PostgreSQL will be skipped)"
	exit 0
fi
# The package would create and start a cluster of its own ("main"); the benchmark needs
# only the programs.
mkdir -p /etc/postgresql-common
if ! grep -qs '^create_main_cluster' /etc/postgresql-common/createcluster.conf; then
	echo 'create_main_cluster = false' >>/etc/postgresql-common/createcluster.conf
fi
echo "install-postgres: apt-get install postgresql"
apt_install() {
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold postgresql >/dev/null
}
apt_install || { apt-get update >/dev/null && apt_install; }
found

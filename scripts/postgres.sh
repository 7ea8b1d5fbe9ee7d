#!/usr/bin/env bash
# PostgreSQL server binaries for the tests (tests/support/postgres.py starts a throw-away server
# with initdb + pg_ctl). Installs Debian's `postgresql` with apt-get when they are missing and we
# are root; without a main cluster (nothing listens on 5432). TRACESCORER_PG_BIN overrides.
set -euo pipefail
if [ -n "${TRACESCORER_PG_BIN:-}" ] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin): the postgres-mode tests will be skipped;" \
       "install Debian's postgresql package or set TRACESCORER_PG_BIN" >&2
  exit 0
fi
echo "installing PostgreSQL for the tests (apt-get install postgresql)" >&2
mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/tracescorer-tests.conf
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends postgresql >/dev/null
ls /usr/lib/postgresql/*/bin/initdb >/dev/null

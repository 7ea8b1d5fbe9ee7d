#!/usr/bin/env bash
# Create or update the project venv from the lock file: scripts/venv.sh VENV [EXTRA]
#   scripts/venv.sh .venv        runtime dependencies (make demo)
#   scripts/venv.sh .venv dev    runtime + the dev extra (make test)
#   scripts/venv.sh .venv lock   print the venv's exact versions in constraints.txt form (make lock)
#
# uv (from PyPI; bootstrapped with pip into a cache dir when it is not on PATH) creates the venv
# and installs with constraints.txt, leaving out the packages listed in excludes.txt (litellm
# dependencies the product never imports). Without uv, plain venv + pip install the same pins
# (and the excluded packages too: pip cannot leave out a dependency). UV=/path/to/uv picks a uv,
# UV=none forces pip.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:?usage: scripts/venv.sh VENV [dev|lock]}
extra=${2:-}
python=${PYTHON:-python3}
uv_version=$(sed -n 's/^uv==//p' constraints.txt)

find_uv() {
  [ "${UV:-}" = none ] && return 0  # UV=none: plain venv + pip
  if [ -n "${UV:-}" ]; then echo "$UV"; return; fi
  local candidate
  candidate=$(command -v uv || true)
  if [ -n "$candidate" ] && "$candidate" pip install --help 2>/dev/null | grep -q -- '--excludes'; then
    echo "$candidate"; return
  fi
  local dir="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/tracescorer/uv-$uv_version"
  if [ ! -x "$dir/bin/uv" ]; then
    "$python" -m pip install -q --disable-pip-version-check --no-warn-script-location \
      --target "$dir" "uv==$uv_version" >&2 2>/dev/null || return 0
  fi
  [ -x "$dir/bin/uv" ] && echo "$dir/bin/uv"
  return 0
}

uv=$(find_uv)
if [ "$extra" = lock ]; then
  {
    if [ -n "$uv" ]; then
      VIRTUAL_ENV="$venv" "$uv" pip freeze --exclude-editable -q
    else
      "$venv/bin/python" -m pip freeze --exclude-editable --disable-pip-version-check
    fi | grep -v -i -E '^(pip|setuptools|wheel|uv)=='
    # excluded packages keep their pins, for installs with pip (which cannot leave them out)
    for name in $(sed 's/#.*//' excludes.txt); do
      grep -i -E "^${name//-/[-_]}==" constraints.txt || true
    done
    echo "uv==$uv_version"
  } | sort -f -u -t= -k1,1
  exit 0
fi
target="."
[ -n "$extra" ] && target=".[$extra]"
if [ -n "$uv" ]; then
  [ -x "$venv/bin/python" ] || "$uv" venv -q --python "$python" "$venv"
  VIRTUAL_ENV="$venv" "$uv" pip install -q --compile-bytecode -c constraints.txt --excludes excludes.txt -e "$target"
else
  echo "uv is not available: installing with pip (slower, and without excludes.txt)" >&2
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt -e "$target"
fi

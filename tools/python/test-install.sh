#!/usr/bin/env bash
# The fidosim Python package as a user installs it: its examples run from a directory outside the clone,
# once with python-fido2 (the venv `make venv` made) and once in a venv with the standard library only.
# Usage: test-install.sh FIDOSIM_BIN VENV_PYTHON BASE_PYTHON
set -euo pipefail
bin=$1 venv_python=$2 base_python=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/fidosim-package.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$here"/examples/test_*.py "$work"/
cd "$work"

echo "python package: the examples with python-fido2, from $work"
FIDOSIM_BIN=$bin "$venv_python" -m pytest -p no:cacheprovider -q .

echo "python package: a pytest session inside fidosim run (its key, and a fixture's private key in-process)"
"$bin" run --serial RUN-KEY --flash memory --control off --log-level warning -- env FIDOSIM_BIN="$bin" \
    "$venv_python" -m pytest -p no:cacheprovider -q "$here/examples/run_session_test_private.py"

echo "python package: a venv with the standard library only (the package and pytest)"
"$base_python" -m venv "$work/stdlib-venv"
"$work/stdlib-venv/bin/python" -m pip install -q "$here" pytest
if "$work/stdlib-venv/bin/python" -c 'import fido2' 2>/dev/null; then
    echo "python package: python-fido2 leaked into the standard-library venv"; exit 1
fi
FIDOSIM_BIN=$bin "$work/stdlib-venv/bin/python" -m pytest -p no:cacheprovider -q test_standard_library.py

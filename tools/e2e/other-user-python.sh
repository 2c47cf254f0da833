#!/usr/bin/env bash
# A library directory for Debian's /usr/bin/python3 with what the clients of the host run and the private-key tests
# import (python-fido2, pytest, websockets for the browser harnesses, the fidosim package), readable by every user.
#   other-user-python.sh DIR REPO      (re)made when a package is missing or the fidosim package's source changed
set -euo pipefail
dir=$1
repo=$2
# The package's source as one hash: a directory made from an older source (a module less) is made again.
source_hash=$(cd "$repo/tools/python" && find pyproject.toml src -type f -not -path '*/__pycache__/*' \
    -not -path '*.egg-info/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)
if [ "$(cat "$dir/.fidosim-source" 2>/dev/null)" != "$source_hash" ] ||
    ! PYTHONPATH=$dir /usr/bin/python3 -c 'import fido2, pytest, websockets, fidosim' 2>/dev/null; then
    rm -rf "$dir"
    /usr/bin/python3 -m pip install -q --no-warn-script-location --target "$dir" 'fido2>=2.2,<3' pytest websockets \
        "$repo/tools/python"
    rm -rf "$repo/tools/python/build"
    echo "$source_hash" >"$dir/.fidosim-source"
fi
chmod -R a+rX "$dir"

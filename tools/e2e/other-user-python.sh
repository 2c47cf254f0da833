#!/usr/bin/env bash
# A library directory for Debian's /usr/bin/python3 with what the clients of the host run and the private-key tests
# import (python-fido2, pytest, websockets for the browser harnesses, the fidosim package), readable by every user.
#   other-user-python.sh DIR REPO      (re)made when a package is missing
set -euo pipefail
dir=$1
repo=$2
if ! PYTHONPATH=$dir /usr/bin/python3 -c 'import fido2, pytest, websockets, fidosim' 2>/dev/null; then
    rm -rf "$dir"
    /usr/bin/python3 -m pip install -q --no-warn-script-location --target "$dir" 'fido2>=2.2,<3' pytest websockets \
        "$repo/tools/python"
    rm -rf "$repo/tools/python/build"
fi
chmod -R a+rX "$dir"

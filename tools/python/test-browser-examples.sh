#!/usr/bin/env bash
# make browser-examples: the package's browser examples (examples/browser: Playwright and Selenium driving Debian's
# Chromium against a private key) as a test engineer runs them, from a directory outside the clone and as an
# unprivileged user: as root they run as fidosim-e2e (made here if make host-e2e has not made it), as another user
# as that user. Debian's python3 runs them, with a library directory every user may read (the clone may live where
# only its owner enters): python-fido2, pytest, Selenium and Playwright, kept in .build between runs, and the fidosim
# package installed afresh from this tree.
#   test-browser-examples.sh FIDOSIM_BIN        PLAYWRIGHT_VERSION (default 1.63.0, the one tried with Debian's
#                                               Chromium: Playwright speaks the DevTools protocol of its own release)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=$1
playwright=${PLAYWRIGHT_VERSION:-1.63.0}
python=/usr/bin/python3
deps=$repo/.build/browser-examples-python
if ! PYTHONPATH=$deps $python -c "import fido2, pytest, selenium, importlib.metadata as m
assert m.version('playwright') == '$playwright'" 2>/dev/null; then
    echo "browser examples: installing python-fido2, pytest, Selenium and Playwright $playwright into $deps"
    rm -rf "$deps"
    $python -m pip install -q --no-warn-script-location --target "$deps" 'fido2>=2.2,<3' pytest selenium \
        "playwright==$playwright"
fi
stage=$(mktemp -d /tmp/fidosim-browser-examples.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tools/python/examples" "$stage/home"
cp "$bin" "$stage/fidosim"
cp -r "$deps" "$stage/pylib"
# The package from a copy: pip builds in the source directory, and other stages install this tree's at the same time.
cp -r "$here" "$stage/package"
rm -rf "$stage/package/build"
$python -m pip install -q --no-warn-script-location --no-deps --target "$stage/pylib" "$stage/package"
cp -r "$repo/tools/browser" "$stage/tools/browser"
cp -r "$here/examples/browser" "$stage/tools/python/examples/browser"
chmod -R a+rX "$stage"
run=()
if [ "$(id -u)" = 0 ]; then
    user=fidosim-e2e
    id -u "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
    chown "$user" "$stage/home"
    run=(runuser -u "$user" --)
fi
echo "browser examples: pytest in $stage as $([ ${#run[@]} -gt 0 ] && echo fidosim-e2e || id -un)"
cd "$stage"
"${run[@]}" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$stage/home" TMPDIR=/tmp LANG=C.UTF-8 \
    PYTHONPATH="$stage/pylib" PYTHONDONTWRITEBYTECODE=1 FIDOSIM_BIN="$stage/fidosim" \
    $python -m pytest -p no:cacheprovider -q tools/python/examples/browser

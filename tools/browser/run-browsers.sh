#!/usr/bin/env bash
# Runs the browser WebAuthn example against the plugged-in fidosim key: chromium | firefox.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
case "${1:-}" in
    chromium) exec timeout 300 "$python" "$here/webauthn_chromium.py" --timeout 90 ;;
    firefox) exec timeout 240 "$python" "$here/webauthn_firefox.py" --timeout 90 ;;
    *) echo "usage: $0 chromium|firefox" >&2; exit 2 ;;
esac

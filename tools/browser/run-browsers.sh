#!/usr/bin/env bash
# Runs the browser WebAuthn example against the plugged-in fidosim key: chromium | firefox.
#   BROWSER_FLOWS    comma-separated flows: passkey (default: a discoverable credential, sign-in with an empty
#                    allow list) and second-factor (a non-discoverable one, sign-in with its id)
#   BROWSER_LOG_DIR  keep the browser's log there (chromium.log with its FIDO log, firefox.log)
#   BROWSER_TIMEOUT  seconds each ceremony may take (default 45)
# Each harness keeps its own deadlines and exits non-zero on failure; `timeout` is only a safety net.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
flows=${BROWSER_FLOWS:-passkey}
logs=${BROWSER_LOG_DIR:-}
case "${1:-}" in
    chromium | firefox)
        exec timeout 600 "$python" "$here/webauthn_$1.py" --timeout "${BROWSER_TIMEOUT:-45}" --flows "$flows" \
            ${logs:+--log-file "$logs/$1.log"} ;;
    *) echo "usage: $0 chromium|firefox" >&2; exit 2 ;;
esac

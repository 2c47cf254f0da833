# The VM run's browser group: Chromium and Firefox. Sourced by inside-vm.sh; e2e_browser runs it in the
# current round.

# --- browsers ----------------------------------------------------------------------------------
# The key must exist before a browser starts (Chromium enumerates hidraw devices at start-up). Each browser
# gets a fresh key in memory (no PIN: a headless browser cannot show its PIN dialog) and runs its flows in one
# start; its log (Chromium's with its FIDO device log) lands in $out/<browser>.log.
# Chromium raises userVerification to "required" for a discoverable credential on a security key: its key has
# the simulated fingerprint sensor with one finger enrolled, so Chromium verifies the user with the finger
# (getPinUvAuthTokenUsingUvWithPermissions) and runs the passkey flow too. Firefox takes "preferred" at its
# word and runs both flows on a key without built-in UV.
flows_for() {
    [ "$smoke" = 1 ] && { echo second-factor; return; }  # the VM's smoke ceremony
    case $1 in
        chromium) echo "${CHROMIUM_FLOWS:-passkey,second-factor}" ;;
        *) echo "${BROWSER_FLOWS:-passkey,second-factor}" ;;
    esac
}
key_args_for() {
    case $1 in
        chromium) echo "--uv fingerprint --enrolled-fingers 1" ;;
        *) echo "" ;;
    esac
}

e2e_browser() {
if want browser; then
    [ -n "$copy_pid" ] && wait "$copy_pid" && cat "$results/in-memory.log"
    copy_pid=
    for browser in ${E2E_BROWSERS:-chromium firefox}; do
        group
        # shellcheck disable=SC2046 # the key arguments are words
        gate "start-key-$browser" start_key "e2e-$browser" --flash memory --control "$HOME/browser-$browser.sock" \
            $(key_args_for "$browser")
        # Under the VM's emulated CPUs a browser takes minutes to start: a longer deadline there, no second try.
        step "browser-$browser" env PYTHON="$python" BROWSER_FLOWS="$(flows_for "$browser")" \
            BROWSER_TIMEOUT="$([ "$smoke" = 1 ] && echo 150 || echo 45)" BROWSER_LOG_DIR="$out" \
            "$repo/tools/browser/run-browsers.sh" "$browser"
        # A key plugged in while the browser waits for one: the key is pulled out (a power cycle that stays off
        # for 6 s) as the browser starts, and comes back while its ceremony waits.
        [ "$key_transport" = private ] && step "browser-$browser-key-arrives" bash -c "'$bin' ctl --control \
            '$HOME/browser-$browser.sock' power-cycle offMs=6000 && PYTHON='$python' BROWSER_FLOWS=second-factor \
            BROWSER_TIMEOUT=45 '$repo/tools/browser/run-browsers.sh' $browser"
        cleanup "stop-key-$browser" stop_key
    done
fi
}

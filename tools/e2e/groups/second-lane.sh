# The VM run's second lane: python-fido2 over hidraw, conform and python-fido2's device suite. Sourced by
# inside-vm.sh; second_lane runs it (in the background, through run_lane) in the current round.

# --- python-fido2 over its own hidraw backend: the interop suite (second lane) --------------------------
# Under emulation every test pays a few seconds to start a key, so the VM runs the part of the suite whose outcome
# depends on the transport: the core flows and CTAPHID behaviour (test_udp_interop), PIN protocols 1 and 2 with
# their blocks and power cycles, credential management, hmac-secret, a large blob (long fragmented messages), and
# of the control socket the touches, events and power cycles that go through the real hidraw device. It runs on the
# host (through private keys, host-lib.sh); the VM keeps the Python package's uhid example as its smoke ceremony. The rest of
# the suite (bio, config, CTAP 2.2, profiles, attestation, several keys, restarts) is about transport-independent
# firmware features and runs over UDP in `make test`. Of the core flows, the checks that only the firmware decides
# (stored user fields, replacing a user's credential, a tampered or U2F credential id, the uv option, the exclude
# list without a client) run over UDP only too: this lane decides how long the VM takes. Each test's key has its own
# serial number, by which the fixtures find its hidraw device.
vm_python_tests=(
    test_udp_interop.py
    "test_pin_interop.py::test_set_change_pin_and_retries"
    "test_pin_interop.py::test_three_wrong_pins_block_until_power_cycle_and_retries_persist"
    "test_pin_interop.py::test_client_register_and_authenticate_with_pin"
    "test_credman_interop.py::test_credential_management"
    "test_extensions_interop.py::test_hmac_secret_and_prf"
    "test_blob_config_interop.py::test_large_blob_extension_with_fido2_client"
    "test_control_interop.py::test_prompt_mode_waits_for_a_touch_announced_by_an_event"
    "test_control_interop.py::test_deny_and_approve_next"
    "test_control_interop.py::test_power_cycle_lifts_the_three_wrong_pins_block"
)
vm_python_udp_only=(
    test_discoverable_user_fields_round_trip test_discoverable_same_user_replaces test_tampered_credential_id
    test_uv_option_rejected test_u2f_key_handle_in_ctap2 "(test_exclude_list and not via_client)"
)
# --- fidosim conform over /dev/hidraw through hidapi ---------------------------------------------------
# Every check, destructive ones included; touches, refusals and power cycles (a uhid unplug and replug, after
# which the runner finds the key again by its serial number) go through the key's control socket. In the second
# lane, after python-fido2, which keeps the two lanes about as long as each other.
conform_group() {
    group
    gate start-key-conform start_key e2e-conform --flash memory --name conform
    step conform-hidraw "$bin" conform --device "hid:$DEV" --name conform --allow-destructive --report "$out/conform"
    # getAssertion through hidraw against the raw signing rate, measured in this VM (emulated, debug build). conform
    # replugged the key, so its node is looked up again by serial number: the old one may now be the gadget's, and a
    # bench there made the first lane's gadget-conform see CHANNEL_BUSY.
    gate find-key-conform wait_for 30 "the conform key's hidraw node" key_with_serial e2e-conform
    step bench-hidraw bash -c "set -o pipefail; '$bin' bench --hid-device '$DEV' --seconds 3 | tee '$out/bench-hidraw.md'"
    cleanup stop-key-conform stop_key
}

second_lane() {
    local udp_only
    udp_only=$(printf ' and not %s' "${vm_python_udp_only[@]}")
    [ "$smoke" = 0 ] && want python && group && step python-fido2-hidraw env "${hidraw_env[@]}" FIDOSIM_BIN="$bin" \
        "$python" -m pytest -p no:benchmark -p no:cacheprovider -q -k "${udp_only# and }" \
        "${vm_python_tests[@]/#/$repo/tools/interop/}"
    # The Python package's pytest fixture with transport="uhid": a key of its own, found through hidraw by serial.
    [ "$key_transport" = uhid ] && want python && group && step python-package-uhid env FIDOSIM_BIN="$bin" "$python" \
        -m pytest -p no:benchmark -p no:cacheprovider -q "$repo/tools/python/examples/test_uhid.py"
    [ "$smoke" = 1 ] && return 0
    want conform && conform_group
    # Last: started before conform, it moved conform-hidraw's 7609-byte PING next to the first lane's browsers,
    # where the starved key let the kernel's uhid output queue (32 reports) overflow once.
    want python && device_suite_group
}
# python-fido2's device tests over hidraw, once: a fresh key with a batch attestation, touched and replugged
# through its control socket by the suite's plugin (tools/device-suite). The socket lives in the round's home
# directory: the results directory is the host's filesystem, where a unix socket cannot be bound.
device_suite_group() {
    local sock=$HOME/device-suite.sock
    group
    gate start-key-device-suite start_key e2e-device-suite --name device-suite --flash memory --presence prompt \
        --control "$sock"
    gate provision-device-suite "$bin" attestation provision --control "$sock" --root-out "$HOME/device-suite-root.pem"
    step python-fido2-device-suite-hidraw env FIDOSIM_BIN="$bin" PYTHON="$python" \
        DEVICE_SUITE_CACHE="$repo/.build/device-suite" bash "$repo/tools/device-suite/run.sh" --hidraw \
        "$sock" e2e-device-suite
    cleanup stop-key-device-suite stop_key
}

# The host run's capture group: a profile captured over hidraw and the copy served from it, both through
# `fidosim run` (captured timings depend on the wall clock: they are measured here, never under the VM's emulated
# CPUs). Sourced by run-host.sh; e2e_capture runs it.

capture_over_private() {
    "$bin" run --flash memory --control off --serial "$(printf '%010d' $((RANDOM * RANDOM)))" \
        --vendor-id 0x1050 --product-id 0x0407 --device-name "YubiKey OTP+FIDO+CCID" --profile yubikey5 \
        --log-level warning -- "$bin" profile capture --device hid:/dev/hidraw0 -o captured.json \
        --name captured-over-hidraw || return 1
    "$python" - <<'PY'
import json
usb = json.load(open("captured.json"))["capture"]["usb"]
print(usb)
# A private key is a USB device with a manufacturer string (fidosim's, as no --manufacturer option exists).
assert usb == {"vendorId": 0x1050, "productId": 0x0407, "manufacturer": "fidosim", "product": "YubiKey OTP+FIDO+CCID",
               "serial": {"length": 10, "alphabet": "digits"}}, usb
PY
}

serve_the_capture_private() { # the copy presents the captured identity, and a capture of it is the same but for timing
    "$bin" run --flash memory --control off --profile captured.json --log-level warning -- bash -c '
        grep -E "^HID_(NAME|UNIQ)=" /sys/class/hidraw/hidraw0/device/uevent
        grep -qx "HID_NAME=YubiKey OTP+FIDO+CCID" /sys/class/hidraw/hidraw0/device/uevent &&
        grep -qE "^HID_UNIQ=[0-9]{10}$" /sys/class/hidraw/hidraw0/device/uevent &&
        fido2-token -L | grep -q "/dev/hidraw0: vendor=0x1050, product=0x0407" &&
        "$0" profile capture --device hid:/dev/hidraw0 -o recaptured.json --name captured-over-hidraw' "$bin" ||
        return 1
    "$python" - <<'PY'
import json
a, b = (json.load(open(name)) for name in ("captured.json", "recaptured.json"))
for doc in (a, b):
    doc["capture"].pop("timing")
assert a == b, [k for k in a["capture"] if a["capture"][k] != b["capture"].get(k)]
print("the capture of the copy equals the capture of the original but for timing")
PY
}

e2e_capture() {
if want capture; then
    group
    gate capture-over-hidraw capture_over_private
    step serve-the-capture serve_the_capture_private
fi
}

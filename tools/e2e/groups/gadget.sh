# The VM run's gadget group: the firmware as a USB device (a HID gadget on dummy_hcd). Sourced by
# inside-vm.sh; e2e_gadget runs it in the current round.

# --- the firmware as a USB device: serve --transport gadget on dummy_hcd -------------------------------
# configfs makes a gadget with one HID function; dummy_hcd is a loopback USB device controller whose host side is
# this kernel: it enumerates the gadget over USB, binds usbhid, and the key appears as a hidraw device.
gadget_ready() { GDEV=$(hidraw_with "HID_NAME=fidosim fidosim gadget key"); } # its hidraw node, once usbhid bound it
gadget_gone() { no_hidraw_with "HID_NAME=fidosim fidosim gadget key" && [ ! -e /sys/kernel/config/usb_gadget/fidosim-gadget ]; }
start_gadget() {
    modprobe dummy_hcd && modprobe libcomposite && modprobe usb_f_hid || return 1
    mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config || return 1
    wait_for 30 "the previous gadget to go" gadget_gone || return 1
    wait_for 30 "the USB device controller to be free" udc_free || return 1
    launch "$out/key-gadget.json" -- --transport gadget --flash memory --presence approve --name gadget \
        --device-name "fidosim gadget key" --log-level info >"$out/serve-gadget.log" 2>&1 &
    serve_pid=$!
    serve_gone=(gadget_gone)
    wait_for 90 "the gadget key's hidraw node" gadget_ready && return 0
    cat "$out/serve-gadget.log"; ls /sys/class/udc /sys/class/hidraw; grep -h HID_NAME /sys/class/hidraw/*/device/uevent
    stop_key
    return 1
}

e2e_gadget() {
if want gadget; then
    group
    gate start-gadget start_gadget
    step gadget-usb-enumerated bash -c "grep -l 'fidosim gadget key' /sys/bus/usb/devices/*/product | tee /dev/stderr | grep -q ."
    step gadget-fido2-token-list bash -c "fido2-token -L | tee /dev/stderr | grep -q '$GDEV: vendor=0x1209, product=0xf1d0'"
    # The gadget's path under the HID and getInfo checks (the firmware's checks: make host-e2e).
    step gadget-conform "$bin" conform --device "hid:$GDEV" --name gadget --only hid,info --report "$out/conform-gadget"
    # The gadget is a real USB device, so hidapi's libusb backend (loaded at run time) lists it by its USB IDs, with
    # the FIDO usage page read from usbhid's sysfs node (hidapi-libusb 0.13 reports none).
    step gadget-list-libusb bash -c "'$bin' conform --list-devices --hid-backend libusb | tee /dev/stderr | grep -q '1209:f1d0	FIDO'"
    # The whole suite again through libusb (usbfs; usbhid is detached while it runs), found by usage page.
    step gadget-conform-libusb bash -c "'$bin' conform --device hid:auto --hid-backend libusb --name gadget \
        --only hid,info --report '$out/conform-gadget-libusb' && grep '0 failed, 0 skipped' '$out/conform-gadget-libusb/report.md'"
    cleanup stop-gadget stop_key
    step gadget-removed bash -c "! ls /sys/kernel/config/usb_gadget/fidosim-gadget 2>/dev/null"
fi
}

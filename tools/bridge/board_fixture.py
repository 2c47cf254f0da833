#!/usr/bin/env python3
"""A stand-in for a USB HID bridge board, made of two uhid devices (needs /dev/uhid, so root in the e2e VM).

A bridge board plugs into the machine under test as a FIDO security key and relays its 64-byte reports to
fidosim, which opens the board's other side as a plain HID device (`fidosim serve --transport hid --device
VID:PID`). Here both sides are on one machine:

- the "board" side: a vendor-defined HID device (usage page 0xFF00, 1209:0001 by default) that fidosim opens;
- the "host" side: a FIDO HID device (usage page 0xF1D0, 1209:F1D1) that fido2-token, python-fido2 or
  `fidosim conform` use as the security key.

What a client writes to the host side comes out of the board side as an input report, and what fidosim writes
to the board side comes back to the client as an input report of the host side: the board firmware's relay.
It prints "bridge board ready" once both devices exist and runs until SIGTERM or SIGINT.

With --board-usb the board side is a real USB device instead: a USB HID gadget (configfs, the HID function,
/dev/hidgN) on the first USB device controller, dummy_hcd in the e2e VM, so that fidosim reaches it the way it
reaches a physical board, through hidapi's libusb backend as well as hidraw.
"""

from __future__ import annotations

import argparse
import collections
import os
import select
import signal
import struct
import sys
import time

EVENT_SIZE = 4380
UHID_DESTROY, UHID_OUTPUT, UHID_GET_REPORT, UHID_GET_REPORT_REPLY = 1, 6, 9, 10
UHID_CREATE2, UHID_INPUT2, UHID_SET_REPORT, UHID_SET_REPORT_REPLY = 11, 12, 13, 14
BUS_USB = 0x03
EIO = 5


def descriptor(usage_page: int) -> bytes:
    """64-byte input and output reports on `usage_page`, usage 1 (the FIDO descriptor's shape)."""
    return bytes([
        0x06, usage_page & 0xFF, usage_page >> 8, 0x09, 0x01, 0xA1, 0x01,
        0x09, 0x20, 0x15, 0x00, 0x26, 0xFF, 0x00, 0x75, 0x08, 0x95, 0x40, 0x81, 0x02,
        0x09, 0x21, 0x15, 0x00, 0x26, 0xFF, 0x00, 0x75, 0x08, 0x95, 0x40, 0x91, 0x02,
        0xC0,
    ])


def event(kind: int, body: bytes) -> bytes:
    data = struct.pack("<I", kind) + body
    return data + bytes(EVENT_SIZE - len(data))


def create2(name: str, serial: str, vendor: int, product: int, usage_page: int) -> bytes:
    rd = descriptor(usage_page)
    body = (name.encode()[:127].ljust(128, b"\0") + b"bridge-board".ljust(64, b"\0")
            + serial.encode()[:63].ljust(64, b"\0")
            + struct.pack("<HHIIII", len(rd), BUS_USB, vendor, product, 0x0100, 0) + rd)
    return event(UHID_CREATE2, body)


class Side:
    def __init__(self, name: str, serial: str, vendor: int, product: int, usage_page: int):
        self.fd = os.open("/dev/uhid", os.O_RDWR | os.O_CLOEXEC)
        os.write(self.fd, create2(name, serial, vendor, product, usage_page))

    def input(self, report: bytes) -> None:
        os.write(self.fd, event(UHID_INPUT2, struct.pack("<H", len(report)) + report))

    def next_output(self) -> bytes | None:
        """The next output report the kernel delivers (feature requests are refused with EIO)."""
        raw = os.read(self.fd, EVENT_SIZE)
        kind = struct.unpack_from("<I", raw)[0]
        if kind == UHID_OUTPUT:
            size = struct.unpack_from("<H", raw, 4 + 4096)[0]
            data = raw[4:4 + size]
            # hidraw passes the report ID byte (0) first when the device has unnumbered reports.
            return data[1:] if len(data) == 65 else data
        if kind == UHID_GET_REPORT:
            request_id = struct.unpack_from("<I", raw, 4)[0]
            os.write(self.fd, event(UHID_GET_REPORT_REPLY, struct.pack("<IHH", request_id, EIO, 0)))
        elif kind == UHID_SET_REPORT:
            request_id = struct.unpack_from("<I", raw, 4)[0]
            os.write(self.fd, event(UHID_SET_REPORT_REPLY, struct.pack("<IH", request_id, EIO)))
        return None

    def destroy(self) -> None:
        os.write(self.fd, event(UHID_DESTROY, b""))
        os.close(self.fd)


def wait_until(what: str, condition, seconds: float = 30.0) -> None:
    """Polls `condition` every 0.1 s until it holds; after `seconds` of wall-clock time, exits saying what it
    waited for."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            raise SystemExit(f"waited {seconds:.0f} s for {what}: gave up")
        time.sleep(0.1)


def read_text(path: str) -> str | None:
    """The file's text, or None when it is gone (sysfs entries vanish while a device is torn down)."""
    try:
        with open(path) as f:
            return f.read()
    except (FileNotFoundError, NotADirectoryError, ProcessLookupError, OSError):
        return None


def usb_hidraw_present(vendor: int, product: int) -> bool:
    """Whether the USB host side has bound usbhid to the gadget: a hidraw node with its IDs on a USB bus (a uhid
    device with the same IDs, say the previous step's board, does not count: its HID_PHYS is not usb-...)."""
    try:
        names = os.listdir("/sys/class/hidraw")
    except FileNotFoundError:
        return False
    for name in names:
        text = read_text(f"/sys/class/hidraw/{name}/device/uevent")
        if text is None:
            continue  # listed, then gone: not this one
        lines = text.splitlines()
        if any(line.endswith(f"{vendor:08X}:{product:08X}") for line in lines if line.startswith("HID_ID=")) and \
                any(line.startswith("HID_PHYS=usb-") for line in lines):
            return True
    return False


class GadgetSide:
    """The board side as a USB HID gadget: 64-byte reports both ways through /dev/hidgN."""

    ROOT = "/sys/kernel/config/usb_gadget/fidosim-board"

    def __init__(self, name: str, serial: str, vendor: int, product: int, usage_page: int):
        root = self.ROOT
        udcs = sorted(os.listdir("/sys/class/udc")) if os.path.isdir("/sys/class/udc") else []
        if not udcs:
            raise SystemExit("no USB device controller (modprobe dummy_hcd) and configfs at /sys/kernel/config")
        if os.path.exists(root):
            self.remove_gadget()  # left by a fixture that did not stop cleanly
        self.fd = -1
        try:
            self.create(root, udcs[0], name, serial, vendor, product, usage_page)
        except BaseException:
            self.destroy()
            raise

    @staticmethod
    def udc_free(udc: str) -> bool:
        """No gadget in configfs is bound to `udc`."""
        base = "/sys/kernel/config/usb_gadget"
        for gadget in os.listdir(base) if os.path.isdir(base) else []:
            if (read_text(f"{base}/{gadget}/UDC") or "").strip() == udc:
                return False
        return True

    def create(self, root: str, udc: str, name: str, serial: str, vendor: int, product: int, usage_page: int):
        for d in ("", "/strings/0x409", "/configs/c.1", "/configs/c.1/strings/0x409", "/functions/hid.board"):
            os.makedirs(root + d, exist_ok=True)
        files = {
            "idVendor": f"0x{vendor:04x}", "idProduct": f"0x{product:04x}", "bcdUSB": "0x0200",
            "strings/0x409/serialnumber": serial, "strings/0x409/manufacturer": "fidosim",
            "strings/0x409/product": name, "configs/c.1/strings/0x409/configuration": "relay",
            "functions/hid.board/protocol": "0", "functions/hid.board/subclass": "0",
            "functions/hid.board/report_length": "64",
        }
        for path, text in files.items():
            with open(f"{root}/{path}", "w") as f:
                f.write(text)
        with open(f"{root}/functions/hid.board/report_desc", "wb") as f:
            f.write(descriptor(usage_page))
        if not os.path.islink(f"{root}/configs/c.1/hid.board"):
            os.symlink(f"{root}/functions/hid.board", f"{root}/configs/c.1/hid.board")
        # The controller is busy while another gadget (an earlier step's, being torn down) is still bound to it.
        wait_until(f"the USB device controller {udc} to be free", lambda: self.udc_free(udc))
        with open(f"{root}/UDC", "w") as f:
            f.write(udc)
        with open(f"{root}/functions/hid.board/dev") as f:
            major, minor = (int(x) for x in f.read().split(":"))
        node = None

        def find_node() -> bool:
            nonlocal node
            for n in sorted(os.listdir("/dev")):
                try:
                    if n.startswith("hidg") and os.stat(f"/dev/{n}").st_rdev == os.makedev(major, minor):
                        node = f"/dev/{n}"
                        return True
                except FileNotFoundError:
                    continue
            return False

        wait_until(f"/dev/hidgN for {major}:{minor}", find_node, 10)
        self.fd = os.open(node, os.O_RDWR | os.O_CLOEXEC | os.O_NONBLOCK)
        # Reports for the host, queued while the IN endpoint still holds the previous one. The other side (uhid)
        # has no flow control, so it is read at once whatever the USB side's pace (uhid drops what it cannot queue).
        self.pending: collections.deque[bytes] = collections.deque()
        # Ready once the host has enumerated it (usbhid bound: a hidraw node for its IDs on the USB bus).
        wait_until(f"the host to enumerate the board {vendor:04x}:{product:04x} (a hidraw node on USB)",
                   lambda: usb_hidraw_present(vendor, product), 60)

    def input(self, report: bytes) -> None:
        self.pending.append(report)
        self.flush()

    def flush(self) -> None:
        """Writes queued reports while the IN endpoint takes them (a write fails with EAGAIN until the host polls)."""
        while self.pending:
            try:
                os.write(self.fd, self.pending[0])
            except BlockingIOError:
                return
            self.pending.popleft()

    def next_output(self) -> bytes | None:
        try:
            report = os.read(self.fd, 64)
        except BlockingIOError:
            return None
        return report or None

    def destroy(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.remove_gadget()

    @classmethod
    def remove_gadget(cls) -> None:
        """Unbinds the gadget and removes it from configfs, whatever part of it exists."""
        root = cls.ROOT
        if (read_text(f"{root}/UDC") or "").strip():
            with open(f"{root}/UDC", "w") as f:
                f.write("\n")
        if os.path.islink(f"{root}/configs/c.1/hid.board"):
            os.remove(f"{root}/configs/c.1/hid.board")
        for d in ("/configs/c.1/strings/0x409", "/configs/c.1", "/functions/hid.board", "/strings/0x409", ""):
            if os.path.isdir(root + d):
                os.rmdir(root + d)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board-id", default="1209:0001", help="VID:PID of the board side (hex)")
    parser.add_argument("--host-id", default="1209:F1D1", help="VID:PID of the host side, the FIDO key (hex)")
    parser.add_argument("--board-usb", action="store_true",
                        help="make the board side a USB HID gadget (configfs, dummy_hcd) instead of a uhid device")
    args = parser.parse_args()
    board_vid, board_pid = (int(x, 16) for x in args.board_id.split(":"))
    host_vid, host_pid = (int(x, 16) for x in args.host_id.split(":"))
    stop = False
    started = False

    def on_signal(*_):
        nonlocal stop
        if not started:  # still setting up: unwind, removing what exists (a gadget must not stay bound)
            raise SystemExit("stopped before the board was ready")
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    board = (GadgetSide if args.board_usb else Side)("fidosim bridge board (board side)", "BOARD0001", board_vid,
                                                     board_pid, 0xFF00)
    try:
        host = Side("fidosim bridge board (host side)", "BRIDGE0001", host_vid, host_pid, 0xF1D0)
    except BaseException:
        board.destroy()
        raise
    started = True
    print("bridge board ready", flush=True)
    relayed = 0
    while not stop:
        waiting = [board.fd] if getattr(board, "pending", None) else []
        try:
            ready, writable, _ = select.select([board.fd, host.fd], waiting, [], 0.5)
        except InterruptedError:
            continue
        if writable:
            board.flush()
        for fd in ready:
            source, target = (host, board) if fd == host.fd else (board, host)
            report = source.next_output()
            if report is not None:
                target.input(report)
                relayed += 1
    board.destroy()
    host.destroy()
    print(f"bridge board stopped after relaying {relayed} reports", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import struct
import sys

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
    body = (name.encode()[:127].ljust(128, b"\0") + b"bridge-board".ljust(64, b"\0") + serial.encode()[:63].ljust(64, b"\0")
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board-id", default="1209:0001", help="VID:PID of the board side (hex)")
    parser.add_argument("--host-id", default="1209:F1D1", help="VID:PID of the host side, the FIDO key (hex)")
    args = parser.parse_args()
    board_vid, board_pid = (int(x, 16) for x in args.board_id.split(":"))
    host_vid, host_pid = (int(x, 16) for x in args.host_id.split(":"))
    board = Side("fidosim bridge board (board side)", "BOARD0001", board_vid, board_pid, 0xFF00)
    host = Side("fidosim bridge board (host side)", "BRIDGE0001", host_vid, host_pid, 0xF1D0)
    stop = False

    def on_signal(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print("bridge board ready", flush=True)
    relayed = 0
    while not stop:
        try:
            ready, _, _ = select.select([board.fd, host.fd], [], [], 0.5)
        except InterruptedError:
            continue
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

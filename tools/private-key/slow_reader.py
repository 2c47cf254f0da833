"""A reader that falls behind: sends a CTAPHID PING of 7,609 bytes (129 reports each way) to the first key node,
sleeps before reading, then reads the answer; prints `whole` when every report came back in order. Standard
library only.

    python3 slow_reader.py [NODE] [SECONDS]
"""

import os
import struct
import sys
import time

node = sys.argv[1] if len(sys.argv) > 1 else "/dev/hidraw0"
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
fd = os.open(node, os.O_RDWR)


def write(report: bytes) -> None:
    os.write(fd, b"\0" + report.ljust(64, b"\0"))


def read() -> bytes:
    return os.read(fd, 64)


nonce = os.urandom(8)
write(struct.pack(">IBH", 0xFFFFFFFF, 0x86, 8) + nonce)
answer = read()
assert answer[7:15] == nonce, answer.hex()
channel = answer[15:19]
payload = os.urandom(7609)
write(channel + bytes([0x81]) + struct.pack(">H", len(payload)) + payload[:57])
for sequence, offset in enumerate(range(57, len(payload), 59)):
    write(channel + bytes([sequence]) + payload[offset:offset + 59])
time.sleep(pause)  # the key answers meanwhile: 129 reports, twice what hidraw keeps for a reader
first = read()
assert first[:5] == channel + bytes([0x81]), first.hex()
length = struct.unpack(">H", first[5:7])[0]
got = first[7:64]
expected_sequence = 0
while len(got) < length:
    report = read()
    assert report[:4] == channel and report[4] == expected_sequence, (report[:5].hex(), expected_sequence)
    got += report[5:64]
    expected_sequence += 1
print("whole" if got[:length] == payload else "different")

"""The hidraw ioctls of the first key node (/dev/hidraw0) as the kernel answers them, checked from a client:
prints one JSON object. Standard library only.

    python3 hidraw_ioctls.py [NODE]
"""

import array
import errno
import fcntl
import json
import os
import sys
import termios


def ioc(direction, number, size):
    return direction << 30 | size << 16 | ord("H") << 8 | number


READ, WRITE = 2, 1
node = sys.argv[1] if len(sys.argv) > 1 else "/dev/hidraw0"
fd = os.open(node, os.O_RDWR)
out = {}


def call(request, buffer):
    try:
        return fcntl.ioctl(fd, request, buffer, True)
    except OSError as error:
        return errno.errorcode[error.errno]


size = array.array("i", [0])
out["descriptorSize"] = [call(ioc(READ, 1, 4), size), size[0]]
descriptor = bytearray(4 + 4096)
descriptor[0:4] = (4096 - 1).to_bytes(4, "little")
call(ioc(READ, 2, 4100), descriptor)
out["descriptor"] = descriptor[4:4 + size[0]].hex()
# A caller that asks for 5 bytes gets 5, and nothing past them is touched.
short = bytearray(4100)
short[0:4] = (5).to_bytes(4, "little")
short[9:] = b"\xee" * (4100 - 9)
call(ioc(READ, 2, 4100), short)
out["shortDescriptor"] = short[4:9].hex()
out["shortDescriptorUntouched"] = all(b == 0xEE for b in short[9:])
too_big = bytearray(4100)
too_big[0:4] = (4096).to_bytes(4, "little")
out["descriptorTooBig"] = call(ioc(READ, 2, 4100), too_big)
info = bytearray(8)
call(ioc(READ, 3, 8), info)
out["info"] = [int.from_bytes(info[0:4], "little"), int.from_bytes(info[4:6], "little"),
               int.from_bytes(info[6:8], "little")]
# python-fido2's way: a request that says 4100 bytes, a 128-byte buffer. The kernel writes the string and its zero,
# no more: an answer of 4100 bytes would overrun the buffer Python passes.
for name, number in (("name", 4), ("phys", 5), ("uniq", 8)):
    buffer = bytearray(b"\xee" * 128)
    result = call(ioc(READ, number, 4100), buffer)
    text = bytes(buffer).split(b"\0")[0].decode()
    out[name] = [result, text]
    out[name + "Untouched"] = all(b == 0xEE for b in buffer[len(text) + 1:])
tiny = bytearray(4)
out["nameCut"] = [call(ioc(READ, 4, 4), tiny), bytes(tiny).hex()]
feature = bytearray(65)
out["getFeature"] = call(ioc(READ | WRITE, 7, 65), feature)
out["isatty"] = os.isatty(fd)
out["tcgets"] = call(termios.TCGETS, bytearray(60))
out["unknownH"] = call(ioc(READ, 0x30, 4), bytearray(4))
os.close(fd)
print(json.dumps(out))

#!/usr/bin/env python3
"""Writes the seed corpus of the client fuzz target (tools/fuzz/corpus/client/): what a key sends, as
fidosim sends it, read through python-fido2 from `fidosim serve` over UDP (FIDOSIM_BIN, default the debug build).

Each seed is a selector byte (see tools/fuzz/client.swift) and the bytes: authenticator data with attested
credential data and extensions, a getInfo answer, COSE keys, a U2F registration, and CTAPHID answer streams.
"""

import os
import struct
from pathlib import Path

from fido2 import cbor
from fido2.ctap1 import Ctap1
from fido2.ctap2 import Ctap2

from fidosim import start_key

HERE = Path(__file__).resolve().parent
OUT = HERE / "corpus" / "client"


def reports(cid: int, command: int, payload: bytes) -> bytes:
    head = struct.pack(">IBH", cid, command, len(payload)) + payload[:57]
    out = head.ljust(64, b"\0")
    rest, seq = payload[57:], 0
    while rest:
        out += (struct.pack(">IB", cid, seq) + rest[:59]).ljust(64, b"\0")
        rest, seq = rest[59:], seq + 1
    return out


def other_keys() -> dict[str, bytes]:
    """COSE keys of the other types and curves the reader takes (their values need not be points)."""
    def ec2(alg: int, crv: int, size: int) -> bytes:
        return b"\2" + cbor.encode({1: 2, 3: alg, -1: crv, -2: bytes(range(size)), -3: bytes(range(1, size + 1))})
    return {
        "cose-es384": ec2(-35, 2, 48),
        "cose-es512": ec2(-36, 3, 66),
        "cose-es256k": ec2(-47, 8, 32),
        "cose-esp256": ec2(-9, 1, 32),
        "cose-rs256": b"\2" + cbor.encode({1: 3, 3: -257, -1: b"\xc1" + bytes(255), -2: b"\x01\x00\x01"}),
        "cose-mldsa44": b"\2" + cbor.encode({1: 7, 3: -48, -1: bytes(1312)}),
    }


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    binary = os.environ.get("FIDOSIM_BIN") or HERE.parents[1] / ".build" / "debug" / "fidosim"
    with start_key(binary=binary) as key:
        dev = key.device()
        ctap2 = Ctap2(dev)
        info = cbor.encode(dict(ctap2.get_info()))
        rp, user = {"id": "example.com"}, {"id": b"u", "name": "u"}
        made = ctap2.make_credential(bytes(32), rp, user, [{"type": "public-key", "alg": -7}],
                                     extensions={"credProtect": 2, "hmac-secret": True})
        auth_data = bytes(made.auth_data)
        cose = cbor.encode(dict(made.auth_data.credential_data.public_key))
        registration = bytes(Ctap1(dev).register(bytes(32), bytes(32)))
        seeds = {
            "auth-data": b"\0" + auth_data,
            "cbor-item": b"\1" + auth_data[55 + len(made.auth_data.credential_data.credential_id):],
            "cose-es256": b"\2" + cose,
            "cose-ed25519": b"\2" + cbor.encode({1: 1, 3: -8, -1: 6, -2: bytes(32)}),
            **other_keys(),
            "u2f-registration": b"\3" + registration,
            "get-info": b"\4" + info,
            "hid-answer": b"\5" + reports(0x01020304, 0x90, b"\0" + info),
            "hid-keepalive": b"\5" + reports(0x01020304, 0xBB, b"\2") + reports(0x01020304, 0x81, b"ping"),
        }
        for name, data in seeds.items():
            (OUT / name).write_bytes(data)
        print(f"wrote {len(seeds)} seeds to {OUT}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the seed corpus of the authenticator fuzz target (tools/fuzz/corpus/authenticator/).

Each seed is a sequence of driver ops (see tools/fuzz/authenticator.swift): valid requests of every CTAP2
command and subcommand, U2F APDUs, presence answers and power cycles, encoded with python-fido2's canonical
CBOR encoder. Run it again after changing the driver's input format.
"""

import struct
import sys
from pathlib import Path

from fido2 import cbor

OUT = Path(__file__).resolve().parent / "corpus" / "authenticator"
CDH = bytes(range(32))
RP = "example.com"


def op(kind: int, payload: bytes = b"") -> bytes:
    if kind in (0, 1, 2):
        return bytes([kind]) + struct.pack(">H", len(payload)) + payload
    if kind == 6:
        return bytes([kind]) + payload[:1]
    return bytes([kind])


def ctap(command: int, params=None) -> bytes:
    return bytes([command]) + (cbor.encode(params) if params is not None else b"")


APPROVE, DENY, POWER, TOKEN = op(3), op(4), op(5), op(7)


def make_credential(rk=False, ext=None, alg=-7, exclude=None):
    p = {1: CDH, 2: {"id": RP, "name": "Example"}, 3: {"id": b"u9", "name": "nine"},
         4: [{"alg": alg, "type": "public-key"}]}
    if exclude:
        p[5] = [{"id": exclude, "type": "public-key"}]
    if ext:
        p[6] = ext
    p[7] = {"rk": rk}
    return p


def get_assertion(up=True, ext=None, allow=None):
    p = {1: RP, 2: CDH}
    if allow:
        p[3] = [{"id": allow, "type": "public-key"}]
    if ext:
        p[4] = ext
    p[5] = {"up": up}
    return p


seeds = {
    "get_info": op(0, ctap(0x04)),
    "mc_plain_approve": op(0, ctap(0x01, make_credential())) + APPROVE,
    "mc_rk_signed": op(2, ctap(0x01, make_credential(rk=True))) + APPROVE,
    "mc_rk_unsigned_puat": op(0, ctap(0x01, make_credential(rk=True))),
    "mc_eddsa_ext": op(2, ctap(0x01, make_credential(rk=True, alg=-8, ext={
        "credProtect": 3, "hmac-secret": True, "credBlob": b"blob", "largeBlobKey": True,
        "minPinLength": True}))) + APPROVE,
    "mc_deny": op(0, ctap(0x01, make_credential())) + DENY,
    "mc_probe": op(0, ctap(0x01, {**make_credential(), 8: b"", 9: 2})) + APPROVE,
    "ga_discoverable": op(0, ctap(0x02, get_assertion())) + APPROVE + op(0, ctap(0x08)),
    "ga_signed_up_false": op(2, ctap(0x02, get_assertion(up=False, ext={"credBlob": True, "largeBlobKey": True}))),
    "ga_signed_next": op(2, ctap(0x02, get_assertion())) + APPROVE + op(0, ctap(0x08)) + op(0, ctap(0x08)),
    "ga_hmac_bad": op(0, ctap(0x02, get_assertion(ext={"hmac-secret": {1: {1: 2, 3: -25, -1: 1, -2: b"\1" * 32,
                                                                         -3: b"\2" * 32}, 2: b"\0" * 48,
                                                                     3: b"\0" * 32, 4: 2}}))),
    "pin_retries": op(0, ctap(0x06, {1: 2, 2: 1})),
    "pin_key_agreement": op(0, ctap(0x06, {1: 1, 2: 2})) + op(0, ctap(0x06, {1: 2, 2: 2})),
    "pin_token_wrong": op(0, ctap(0x06, {1: 2, 2: 9, 3: {1: 2, 3: -25, -1: 1, -2: b"\1" * 32, -3: b"\2" * 32},
                                        6: b"\0" * 32, 9: 3, 10: RP})),
    "pin_set_bad": op(0, ctap(0x06, {1: 1, 2: 3, 3: {1: 2, 3: -25, -1: 1, -2: b"\1" * 32, -3: b"\2" * 32},
                                    4: b"\0" * 16, 5: b"\0" * 64})),
    "pin_change_bad": op(0, ctap(0x06, {1: 2, 2: 4, 3: {1: 2, 3: -25, -1: 1, -2: b"\1" * 32, -3: b"\2" * 32},
                                       4: b"\0" * 32, 5: b"\0" * 80, 6: b"\0" * 32})),
    "pin_uv_subcommands": op(0, ctap(0x06, {1: 2, 2: 7})) + op(0, ctap(0x06, {1: 2, 2: 6, 9: 1})),
    "cm_metadata_rps": op(2, ctap(0x0A, {1: 1})) + op(2, ctap(0x0A, {1: 2})) + op(0, ctap(0x0A, {1: 3})),
    "cm_credentials": op(2, ctap(0x0A, {1: 4, 2: {1: bytes.fromhex(
        "a379a6f6eeafb9a55e378c118034e2751e682fab9f2d30ab13d2125586ce1947")}})) + op(0, ctap(0x0A, {1: 5})),
    "cm_preview_update": op(2, ctap(0x41, {1: 7, 2: {2: {"id": b"\1" * 63, "type": "public-key"},
                                                   3: {"id": b"\1", "name": "new"}}})),
    "cm_delete": op(2, ctap(0x0A, {1: 6, 2: {2: {"id": b"\1" * 63, "type": "public-key"}}})),
    "reset_approve": op(0, ctap(0x07)) + APPROVE + op(0, ctap(0x04)),
    "selection": op(0, ctap(0x0B)) + APPROVE,
    "power_cycle_token": POWER + TOKEN + op(2, ctap(0x02, get_assertion(up=False))),
    "token_timeout": TOKEN + op(6, b"\x40") + op(2, ctap(0x02, get_assertion(up=False))),
    "u2f_version": op(1, bytes([0, 3, 0, 0, 0, 0, 0])),
    "u2f_register": op(1, bytes([0, 1, 0, 0, 0, 0, 64]) + CDH + CDH + b"\0\0") + APPROVE,
    "u2f_authenticate": op(1, bytes([0, 2, 3, 0, 0, 0, 65 + 63]) + CDH + CDH + bytes([63]) + b"\1" * 63 + b"\0\0"),
}

OUT.mkdir(parents=True, exist_ok=True)
for name, data in seeds.items():
    (OUT / name).write_bytes(data)
print(f"{len(seeds)} seeds in {OUT}", file=sys.stderr)

"""One registration and one authentication with python-fido2 through its own hidraw backend (list_devices), both
verified by python-fido2's relying party (Fido2Server). Prints the device path and `verified`.

    python3 ceremony.py [SERIAL]     the key with that serial number (default: the only one)
"""

import sys

from fido2.client import DefaultClientDataCollector, Fido2Client
from fido2.hid import CtapHidDevice
from fido2.server import Fido2Server
from fido2.webauthn import PublicKeyCredentialRpEntity, PublicKeyCredentialUserEntity

devices = list(CtapHidDevice.list_devices())
if len(sys.argv) > 1:
    devices = [d for d in devices if d.descriptor.serial_number == sys.argv[1]]
if len(devices) != 1:
    sys.exit(f"expected one key, found {devices}")
device = devices[0]
print("device", device.descriptor.path, device.descriptor.serial_number)
server = Fido2Server(PublicKeyCredentialRpEntity(id="example.com", name="Example"))
client = Fido2Client(device, client_data_collector=DefaultClientDataCollector("https://example.com"))
user = PublicKeyCredentialUserEntity(id=b"user-1", name="alice", display_name="Alice")
options, state = server.register_begin(user, user_verification="discouraged")
registration = client.make_credential(options["publicKey"])
credential = server.register_complete(state, registration).credential_data
options, state = server.authenticate_begin([credential], user_verification="discouraged")
response = client.get_assertion(options["publicKey"]).get_response(0)
server.authenticate_complete(state, [credential], response)
print("verified")

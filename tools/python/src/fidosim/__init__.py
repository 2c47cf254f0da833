"""Drive fidosim virtual FIDO2 security keys from Python: the control socket, a python-fido2 device over UDP,
a launcher and a pytest plugin (fixtures ``fidosim_key`` and ``fidosim_server``).

    from fidosim import start_key, FidosimControl, open_udp_device

The standard library is enough for everything but CTAP itself; ``Key.device()`` and ``open_udp_device`` need
python-fido2 (`pip install 'fidosim[fido2]'`).
"""

from .control import (
    ControlError,
    FailedError,
    FidosimControl,
    InvalidParamsError,
    InvalidRequestError,
    NotFoundError,
    ParseError,
    PermissionDeniedError,
    ProtocolError,
    TooLargeError,
    UnknownCommandError,
    b64url,
    default_socket_path,
    unb64url,
)
from .hub import FidosimHub, VirtualAuthenticatorOptions
from .key import EventStream, FidosimNotFound, FidosimServer, Key, KeyStartError, find_binary, start_key
from .udp import free_udp_port, open_udp_device, power_cycle, probe_init, wait_until_ready

__version__ = "0.2.0"

__all__ = [
    "ControlError", "EventStream", "FailedError", "FidosimControl", "FidosimHub", "FidosimNotFound", "FidosimServer",
    "InvalidParamsError", "InvalidRequestError", "Key", "KeyStartError", "NotFoundError", "ParseError",
    "PermissionDeniedError", "ProtocolError", "TooLargeError", "UnknownCommandError", "b64url",
    "default_socket_path", "find_binary", "free_udp_port", "open_udp_device", "power_cycle", "probe_init",
    "start_key", "unb64url", "VirtualAuthenticatorOptions", "wait_until_ready",
]

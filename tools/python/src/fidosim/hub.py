"""Keys added and removed while fidosim runs: the hub socket of `fidosim serve --hub` or `fidosim run --hub`
(firmware-spec/control.md, "The hub"), with WebDriver's Add and Remove Virtual Authenticator.

``VirtualAuthenticatorOptions`` takes the names of Selenium's class of that name (``protocol``, ``transport``,
``has_resident_key``, ``has_user_verification``, ``is_user_consenting``, ``is_user_verified``), Chromium's extra ones
and fidosim's own, so a test written for Selenium's virtual authenticator keeps its options:

    with FidosimServer(transport="private", keys=0, hub=True) as server:
        key = server.add_key(VirtualAuthenticatorOptions(has_resident_key=True, has_user_verification=True,
                                                         is_user_verified=True))
        ...
        server.remove_key(key)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .control import FidosimControl


@dataclass
class VirtualAuthenticatorOptions:
    """WebDriver's virtual authenticator options (WebAuthn Level 3 §11.2), spelled as Selenium's Python class spells
    them, plus Chromium's ``ctap2_version``, ``has_large_blob``, ``has_cred_blob``, ``has_min_pin_length``,
    ``has_prf``, ``default_backup_eligibility``, ``default_backup_state`` and fidosim's ``name``, ``flash``
    (``memory`` unless given), ``profile`` and ``serial``. Defaults are WebDriver's: no resident keys, no user
    verification, the user consents."""

    protocol: str = "ctap2"
    transport: str = "usb"
    has_resident_key: bool = False
    has_user_verification: bool = False
    is_user_consenting: bool = True
    is_user_verified: bool = False
    extensions: list[str] = field(default_factory=list)
    ctap2_version: str | None = None
    has_large_blob: bool | None = None
    has_cred_blob: bool | None = None
    has_min_pin_length: bool | None = None
    has_prf: bool | None = None
    default_backup_eligibility: bool | None = None
    default_backup_state: bool | None = None
    name: str | None = None
    flash: str | None = None
    profile: str | None = None
    serial: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The command's parameters, in WebDriver's (camelCase) names; options left as None are left out."""
        names = {
            "protocol": "protocol", "transport": "transport", "has_resident_key": "hasResidentKey",
            "has_user_verification": "hasUserVerification", "is_user_consenting": "isUserConsenting",
            "is_user_verified": "isUserVerified", "ctap2_version": "ctap2Version", "has_large_blob": "hasLargeBlob",
            "has_cred_blob": "hasCredBlob", "has_min_pin_length": "hasMinPinLength", "has_prf": "hasPrf",
            "default_backup_eligibility": "defaultBackupEligibility", "default_backup_state": "defaultBackupState",
            "name": "name", "flash": "flash", "profile": "profile", "serial": "serial",
        }
        out = {wire: getattr(self, attribute) for attribute, wire in names.items()
               if getattr(self, attribute) is not None}
        if self.extensions:
            out["extensions"] = list(self.extensions)
        return out


class FidosimHub(FidosimControl):
    """A connection to the hub socket: it adds, lists and removes keys. A key's own commands (credentials,
    presence, user verification) go to the key's control socket, which each result names (``control``)."""

    def add_virtual_authenticator(self, options: VirtualAuthenticatorOptions | dict | None = None) -> dict:
        """Adds a key; returns ``{authenticatorId, control, transport}`` (``transport`` as the ready file gives a
        key's: its hidraw node, UDP port or uhid serial)."""
        if isinstance(options, VirtualAuthenticatorOptions):
            params = options.to_dict()
        else:
            params = dict(options or {})
        return self._exchange("addVirtualAuthenticator", params)

    def remove_virtual_authenticator(self, authenticator_id: str) -> None:
        """Removes a key: its device goes, as a key pulled out does; its image too, unless it was a file."""
        self.request("removeVirtualAuthenticator", authenticatorId=authenticator_id)

    def list_virtual_authenticators(self) -> list[dict]:
        """Every key the process serves, those it started with first."""
        return self.request("listVirtualAuthenticators")["authenticators"]

// The built-in key profiles (`serve --profile NAME`, `fidosim profiles`), as the JSON a user's own profile file
// holds (firmware-spec/profiles.md). Compiled in rather than shipped as a resource bundle: reading a bundle needs
// Foundation's Bundle, which would load Foundation and ICU into every fidosim process (about 7 MiB resident).

extension ProfileFile {
    static let builtIn: [String: String] = [
        "always-uv": #"""
        {
          "name": "always-uv",
          "attestation": "shared-batch",
          "description": "fidosim with alwaysUv on from the factory (at the first start and after every reset): every makeCredential and getAssertion with user presence needs user verification, U2F is switched off.",
          "alwaysUv": true
        }
        """#,
        "ctap20": #"""
        {
          "name": "ctap20",
          "attestation": "shared-batch",
          "description": "A CTAP 2.0 key of 2019: U2F and FIDO_2_0 only, PIN/UV auth protocol 1, hmac-secret and credProtect, ES256, 25 discoverable credentials, 1200-byte messages. No credential management, large blobs, config or selection. Behaves as CTAP 2.0 says: one pinToken per power-up for any number of requests, a PIN needed for every credential once set, up in makeCredential and rk in getAssertion are INVALID_OPTION, clientPIN subcommands 1 to 5, an unknown PIN protocol is PIN_AUTH_INVALID.",
          "versions": ["U2F_V2", "FIDO_2_0"],
          "extensions": ["hmac-secret", "credProtect"],
          "pinUvAuthProtocols": [1],
          "algorithms": ["ES256"],
          "maxResidentCredentials": 25,
          "maxMsgSize": 1200
        }
        """#,
        "ctap21pre": #"""
        {
          "name": "ctap21pre",
          "attestation": "shared-batch",
          "description": "A FIDO_2_1_PRE key of 2020 (CTAP 2.1 review draft): U2F, FIDO_2_0 and FIDO_2_1_PRE, credentialMgmtPreview (0x41) and no 0x0A, PIN/UV auth protocol 1, getPinToken tokens without permissions that authorise makeCredential, getAssertion and 0x41 until the next getPinToken or a power cycle, a PIN needed for every credential once set, clientPIN subcommands 1 to 5, hmac-secret and credProtect, ES256 and EdDSA, 25 discoverable credentials, 1200-byte messages.",
          "versions": ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE"],
          "extensions": ["hmac-secret", "credProtect"],
          "pinUvAuthProtocols": [1],
          "algorithms": ["ES256", "EdDSA"],
          "maxResidentCredentials": 25,
          "maxMsgSize": 1200,
          "behaviour": {"pinToken": "withoutPermissions", "makeCredUvNotRqd": false, "clientPinSubcommands": [1, 2, 3, 4, 5]}
        }
        """#,
        "fidosim": #"""
        {
          "name": "fidosim",
          "attestation": "shared-batch",
          "description": "fidosim with everything it implements: CTAP 2.3 (with the CTAP 2.2 features), U2F, PIN/UV auth protocols 2 and 1, thirteen algorithms (ES256, EdDSA, ES384, ES512, the fully specified ESP256/ESP384/ESP512 and Ed25519, ML-DSA-65 and ML-DSA-87, RS256, PS256, ES256K)."
        }
        """#,
        "legacy-quirks": #"""
        {
          "name": "legacy-quirks",
          "attestation": "shared-batch",
          "description": "A CTAP 2.1 key with the quirks of older firmware: one credential per allow or exclude list (longer lists answer LIMIT_EXCEEDED), no displayName stored with discoverable credentials, ES256 only.",
          "versions": ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1"],
          "algorithms": ["ES256"],
          "maxCredentialCountInList": 1,
          "quirks": {"rejectsLargeLists": true, "dropsDisplayName": true}
        }
        """#,
        "solo1": #"""
        {
          "name": "solo1",
          "attestation": "shared-batch",
          "description": "A Solo 1 key (SoloKeys, firmware 4; the FIDO_2_1_PRE generation, fido2/ctap.c): U2F, FIDO_2_0 and FIDO_2_1_PRE, credential management named credMgmt and served on 0x0A and 0x41 alike, PIN protocol 1 with one pinToken per power-up (no permissions), clientPIN subcommands 1 to 5, credProtect and hmac-secret, ES256, 50 discoverable credentials, 1200-byte messages, 20 credentials per list, its AAGUID, and Solo's choices: setPIN on a key with a PIN is NOT_ALLOWED, an hmac-secret salt of the wrong size is INVALID_LENGTH before anything else, a clientPIN request without PIN protocol 1 or with an unknown subcommand is CTAP1_ERR_OTHER, credential management on a key with no discoverable credential answers success with no data, up in makeCredential is INVALID_OPTION.",
          "versions": ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE"],
          "extensions": ["credProtect", "hmac-secret"],
          "pinUvAuthProtocols": [1],
          "algorithms": ["ES256"],
          "maxResidentCredentials": 50,
          "maxMsgSize": 1200,
          "maxCredentialIdLength": 128,
          "maxCredentialCountInList": 20,
          "aaguid": "8876631b-d4a0-427f-5773-0ec71c9e0279",
          "behaviour": {"pinToken": "powerUp", "previewCredentialManagement": "credMgmt", "makeCredUvNotRqd": false, "optionRules": "ctap2.0", "clientPinSubcommands": [1, 2, 3, 4, 5], "setPinWhenSet": "notAllowed", "hmacSecretSaltLength": "onTheWire", "pinProtocolForRetries": "required", "clientPinErrors": "other", "credentialManagementWhenEmpty": "emptySuccess"}
        }
        """#,
        "tiny-storage": #"""
        {
          "name": "tiny-storage",
          "attestation": "shared-batch",
          "description": "fidosim with room for 3 discoverable credentials (like the resident_credential_storage of Chromium's virtual authenticator): the 4th answers KEY_STORE_FULL.",
          "maxResidentCredentials": 3
        }
        """#,
        "yubikey5": #"""
        {
          "name": "yubikey5",
          "attestation": "shared-batch",
          "description": "A YubiKey 5 series key of firmware 5.7: U2F, FIDO_2_0, FIDO_2_1_PRE and FIDO_2_1, its extensions (credProtect, hmac-secret, largeBlobKey, credBlob, minPinLength), ES256 and EdDSA, 100 discoverable credentials, 1280-byte messages, its AAGUID, and Yubico's choices where the specification leaves one: getPINRetries without a PIN answers PIN_NOT_SET.",
          "versions": ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1"],
          "extensions": ["credProtect", "hmac-secret", "largeBlobKey", "credBlob", "minPinLength"],
          "algorithms": ["ES256", "EdDSA"],
          "maxResidentCredentials": 100,
          "maxMsgSize": 1280,
          "aaguid": "a25342c0-3cdc-4414-8e46-f4807fca511c",
          "behaviour": {"pinRetriesWithoutPin": "pinNotSet"}
        }
        """#,
        "u2f-only": #"""
        {
          "name": "u2f-only",
          "attestation": "shared-batch",
          "description": "A U2F (CTAP1) key: CTAPHID without the CBOR capability, so CTAP2 requests are refused at the transport (ERR_INVALID_CMD) and hosts fall back to U2F.",
          "versions": ["U2F_V2"],
          "algorithms": ["ES256"]
        }
        """#,
    ]
}

import CTAPCBOR
import Crypto

/// A discoverable or stored credential as its flash record holds it: a CBOR map with integer keys (storage.md,
/// "Credential records"); the rpIdHash is computed again from the rpId when it is read.
package enum CredentialRecord {
    /// The record of a credential.
    package static func encode(_ c: ResidentCredential) -> [UInt8] {
        var user: [CBORValue: CBORValue] = ["id": .byteString(c.user.id)]
        if let name = c.user.name { user["name"] = .textString(name) }
        if let displayName = c.user.displayName { user["displayName"] = .textString(displayName) }
        if let icon = c.user.icon { user["icon"] = .textString(icon) }
        var record: [CBORValue: CBORValue] = [
            1: .byteString(c.id),
            2: .textString(c.rpId),
            3: .map(user),
            4: .byteString(c.privateKey),
            5: .unsigned(c.creationSerial),
        ]
        if c.algorithm != .es256 { record[6] = CBORValue(c.algorithm.rawValue) }
        if c.credProtect != .optional { record[7] = CBORValue(Int(c.credProtect.rawValue)) }
        if c.hmacSecret { record[8] = true }
        if let blob = c.credBlob { record[9] = .byteString(blob) }
        if let key = c.largeBlobKey { record[10] = .byteString(key) }
        if c.thirdPartyPayment { record[11] = true }
        if !c.discoverable { record[12] = false }
        if c.backupEligible { record[13] = true }
        if c.backupState { record[14] = true }
        return CBORValue.map(record).encoded()
    }

    /// The credential in a record; nil for one that is not a well-formed credential record.
    package static func decode(_ bytes: [UInt8]) -> ResidentCredential? {
        guard let record = try? CBORDecoder.decode(bytes), let map = record.mapValue else { return nil }
        guard
            let id = map[1]?.bytesValue, let rpId = map[2]?.textValue, let user = map[3]?.mapValue,
            let userId = user["id"]?.bytesValue, let key = map[4]?.bytesValue,
            case .unsigned(let serial)? = map[5]
        else { return nil }
        var algorithm = CredentialAlgorithm.es256
        if let value = map[6] {
            guard let raw = value.intValue, let known = CredentialAlgorithm(rawValue: raw) else { return nil }
            algorithm = known
        }
        guard algorithm.isRawKeyLength(key.count) else { return nil }
        var credProtect = CredProtect.optional
        if let value = map[7] {
            guard let raw = value.intValue, let level = CredProtect(rawValue: UInt8(clamping: raw)) else { return nil }
            credProtect = level
        }
        return ResidentCredential(
            id: id,
            rpId: rpId,
            rpIdHash: Array(SHA256.hash(data: Array(rpId.utf8))),
            user: UserEntity(
                id: userId,
                name: user["name"]?.textValue,
                displayName: user["displayName"]?.textValue,
                icon: user["icon"]?.textValue
            ),
            privateKey: key,
            creationSerial: serial,
            algorithm: algorithm,
            credProtect: credProtect,
            hmacSecret: map[8]?.boolValue ?? false,
            credBlob: map[9]?.bytesValue,
            largeBlobKey: map[10]?.bytesValue,
            thirdPartyPayment: map[11]?.boolValue ?? false,
            discoverable: map[12]?.boolValue ?? true,
            backupEligible: map[13]?.boolValue ?? false,
            backupState: map[14]?.boolValue ?? false
        )
    }
}

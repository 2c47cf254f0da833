import CTAPCBOR
import ControlProtocol

#if canImport(FoundationEssentials)
package import FoundationEssentials  // not Foundation: it would load ICU (about 7 MiB resident) into every fidosim process
#else
package import Foundation
#endif

/// The file of an attestation batch (`attestation provision --batch`): the root's key and certificate and the
/// batch's shared attestation key and certificate, so the batch's other keys get the same attestation certificate.
/// A JSON object whose binary members are base64url; the caller keeps it private (mode 0600: it holds the root's key).
package enum BatchFile {
    package static let format = "fidosim-batch-1"

    /// The file of a new batch.
    package static func encode(
        _ batch: BatchAttestation,
        aaguid: [UInt8],
        organization: String,
        country: String
    ) -> String {
        let document: JSONValue = [
            "format": .string(format),
            "aaguid": .string(Hex.string(aaguid)),
            "organization": .string(organization), "country": .string(country),
            "rootPrivateKey": .string(Base64URL.encode(batch.rootPrivateKey)),
            "rootCertificate": .string(Base64URL.encode(batch.rootCertificate)),
            "privateKey": .string(Base64URL.encode(batch.privateKey)),
            "certificate": .string(Base64URL.encode(batch.certificate)),
        ]
        return document.prettyEncoded
    }

    /// Another key of the batch whose file (read from `path`) is `text`; it must be for the same model of key
    /// (`aaguid`).
    package static func anotherKey(
        ofBatch text: [UInt8],
        path: String,
        aaguid: [UInt8],
        notBefore: Date
    ) throws(Failure) -> BatchAttestation {
        let document: JSONValue
        do {
            document = try JSONParser.parse(text)
        } catch {
            throw Failure("\(path) is not a batch file: \(error)")
        }
        func member(_ name: String) throws(Failure) -> String {
            guard let value = document[name]?.stringValue else {
                throw Failure("\(path) is not a \(format) batch file: no \"\(name)\"")
            }
            return value
        }
        func bytes(_ name: String) throws(Failure) -> [UInt8] {
            guard let value = Base64URL.decode(try member(name)) else {
                throw Failure("\(path): \"\(name)\" is not base64url")
            }
            return value
        }
        guard try member("format") == format else { throw Failure("\(path) is not a \(format) batch file") }
        let batchAAGUID = try member("aaguid")
        guard Hex.bytes(batchAAGUID) == aaguid else {
            throw Failure(
                "the batch \(path) is for AAGUID \(batchAAGUID), this key's is \(Hex.string(aaguid)): a batch is one "
                    + "model of key"
            )
        }
        do {
            return try BatchAttestation.anotherKey(
                ofBatchWithRootPrivateKey: try bytes("rootPrivateKey"),
                rootCertificate: try bytes("rootCertificate"),
                privateKey: try bytes("privateKey"),
                certificate: try bytes("certificate"),
                aaguid: aaguid,
                organization: try member("organization"),
                country: try member("country"),
                notBefore: notBefore
            )
        } catch let error as Failure {
            throw error
        } catch {
            throw Failure("\(path): \(error)")
        }
    }

    /// Why a batch file cannot be used; the message says it whole.
    package struct Failure: Error, CustomStringConvertible {
        package var description: String

        init(_ description: String) { self.description = description }
    }
}

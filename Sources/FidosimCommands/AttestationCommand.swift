import ArgumentParser
import Attestation
import CTAPCBOR
import Console
import ControlClient
import ControlProtocol

#if canImport(FoundationEssentials)
import FoundationEssentials  // not Foundation: it would load ICU (about 7 MiB resident) into every fidosim process
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

struct AttestationCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attestation",
        abstract: "Give a key a batch attestation certificate.",
        subcommands: [Provision.self]
    )

    struct Provision: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Make a batch attestation root CA and leaf certificate and store the leaf and its key in the key.",
            discussion: """
                From then on makeCredential answers packed attestation with the leaf in x5c, and U2F register uses \
                the leaf. The same root issues the key's enterprise attestation certificate (a serial number in its \
                CN), so the key offers enterprise attestation (getInfo ep) from then on. The root certificate is written as PEM for relying parties to trust (`fidosim metadata` \
                puts it in the metadata statement). Works on a running key through its socket, or on its image.
                """
        )

        @OptionGroup var key: CredentialsCommand.KeyOptions

        @Option(help: "The organization (O) in the certificates' subjects.")
        var organization: String = "fidosim"

        @Option(help: "The country (C) in the certificates' subjects, two letters.")
        var country: String = "US"

        @Option(
            help: "Where to write the root certificate (PEM). Default: NAME-attestation-root.pem in the data directory."
        )
        var rootOut: String?

        @Flag(help: "Replace a batch attestation the key already has.")
        var force = false

        @Flag(help: "Say what was done as one JSON object ({rootCertificate, batchFile, sharedBatch}).")
        var json = false

        @Option(
            help: ArgumentHelp(
                "A batch file shared by many keys, as real keys share one batch certificate: made (0600, it holds the "
                    + "root's key) when missing, used when present. Every key of the batch gets the same attestation "
                    + "certificate and its own enterprise attestation certificate.",
                valueName: "path"
            )
        )
        var batch: String?

        func validate() throws {
            guard country.count == 2, country.allSatisfy({ $0.isASCII && $0.isLetter }) else {
                throw ValidationError("--country must be two letters")
            }
            guard !organization.isEmpty, organization.utf8.count <= 64 else {
                throw ValidationError("--organization must be 1 to 64 bytes")
            }
        }

        func run() throws {
            let access = try key.open(creating: true)
            let status = try access.request("status", [:])
            if status["attestation"]?["type"] == "batch" && !force {
                throw ValidationError("the key already has a batch attestation; --force replaces it")
            }
            guard let aaguidHex = status["info"]?["aaguid"]?.stringValue, let aaguid = Hex.bytes(aaguidHex) else {
                throw Failed("the key did not report its AAGUID")
            }
            let notBefore = Date(timeIntervalSince1970: 1_735_689_600)  // 2025-01-01, like the other certificates
            let batch: BatchAttestation
            var shared = ""
            if let path = self.batch, Glibc.access(path, F_OK) == 0 {
                do {
                    batch = try BatchFile.anotherKey(
                        ofBatch: try WholeFile.read(path),
                        path: path,
                        aaguid: aaguid,
                        notBefore: notBefore
                    )
                } catch {
                    throw ValidationError("\(error)")
                }
                shared = " from the batch \(path) (its attestation certificate is shared with the batch's other keys)"
            } else {
                batch = try BatchAttestation.provision(
                    aaguid: aaguid,
                    organization: organization,
                    country: country.uppercased(),
                    notBefore: notBefore
                )
                if let path = self.batch {
                    let file = BatchFile.encode(
                        batch,
                        aaguid: aaguid,
                        organization: organization,
                        country: country.uppercased()
                    )
                    try usage { () throws(WholeFileError) in try WholeFile.writePrivate(path, file, replace: false) }
                    shared = "; the new batch is in \(path) (0600: it holds the root's key) for the batch's other keys"
                }
            }
            let pkcs8 = try batch.privateKeyPKCS8()
            _ = try access.request(
                "setAttestation",
                [
                    "privateKey": .string(Base64URL.encode(pkcs8)),
                    "certificate": .string(Base64URL.encode(batch.certificate)),
                    "rootCertificate": .string(Base64URL.encode(batch.rootCertificate)),
                    "enterprisePrivateKey": .string(Base64URL.encode(try batch.enterprisePrivateKeyPKCS8())),
                    "enterpriseCertificate": .string(Base64URL.encode(batch.enterpriseCertificate)),
                ]
            )
            let path = rootOut ?? KeyPaths.dataDirectory + "/" + key.name + "-attestation-root.pem"
            try usage { () throws(WholeFileError) in
                try WholeFile.writePrivate(
                    path,
                    BatchAttestation.pem(certificate: batch.rootCertificate),
                    replace: true
                )
            }
            if json {
                printLine(
                    JSONValue.object([
                        "rootCertificate": .string(path), "batchFile": self.batch.map { .string($0) } ?? .null,
                        "sharedBatch": .boolean(shared.hasPrefix(" from the batch")),
                    ]).encoded
                )
            } else {
                printLine("fidosim: batch attestation provisioned\(shared); root certificate in \(path)")
            }
        }
    }
}

struct MetadataCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metadata",
        abstract: "Print a FIDO Metadata Statement (MDS3) for a key.",
        discussion: """
            The statement carries the AAGUID, the attestation root (the key's own after `fidosim attestation \
            provision`, else fidosim's shared batch root; a key with self attestation gets attestationTypes \
            basic_surrogate and no root), and authenticatorGetInfo. \
            A relying party that trusts it can verify the key's attestation chain.
            """
    )

    @OptionGroup var key: CredentialsCommand.KeyOptions

    @Option(help: "The statement's description.")
    var description: String = "fidosim virtual FIDO2 security key"

    func run() throws {
        let access = try key.open(creating: false)
        let status = try access.request("status", [:])
        let statement = MetadataStatement.make(status: status, description: description)
        if status["attestation"]?["type"] == "self" {
            printError(
                "fidosim: this key uses self attestation; `fidosim attestation provision` gives it a batch certificate"
            )
        }
        print(statement.prettyEncoded, terminator: "")
    }
}

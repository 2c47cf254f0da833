import ArgumentParser
import Console
import ControlClient
import ControlProtocol
import Crypto
import HIDBridge  // ImageKey: a key that is not running, served from its flash image in this process

#if canImport(Glibc)
import Glibc
#endif

struct CredentialsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "credentials",
        abstract: "Export a key's credentials with their private keys, or import credentials into it.",
        discussion: """
            A running key is reached through its control socket; a key that is not running is read from its \
            flash image (--flash, or the default image of --name). Formats: webdriver ({"credentials": [...]} of \
            WebDriver Credential Parameters, as `fidosim ctl getCredentials` shows them), cdp (Chrome DevTools \
            WebAuthn.getCredentials: standard base64), playwright (a storage state with credentials: \
            discoverable P-256 ones), selenium (an array of Credential.to_dict() objects) and cxf (the FIDO \
            Alliance Credential Exchange Format 1.0; passkeys only). Import recognises the format (--format auto).
            """,
        subcommands: [Export.self, Import.self]
    )

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case auto, webdriver, cdp, playwright, selenium, cxf

        /// The file format, nil for auto.
        var file: CredentialFileFormat? { CredentialFileFormat(rawValue: rawValue) }
    }

    struct KeyOptions: ParsableArguments {
        @Option(help: "The key's name: its control socket, or its default flash image when it is not running.")
        var name: String = "default"

        @Option(help: "The control socket of a running key (as `serve --control` names it).")
        var control: String?

        /// The old spelling of --control, still accepted.
        @Option(name: .customLong("socket"), help: .hidden)
        var socket: String?

        /// The control socket given, by either spelling.
        var controlPath: String? { control ?? socket }

        @Option(help: "A flash image of a key that is not running.")
        var flash: String?

        func validate() throws {
            if control != nil && socket != nil {
                throw ValidationError("give --control once (--socket is its old name)")
            }
            if controlPath != nil && flash != nil { throw ValidationError("give --control or --flash, not both") }
        }

        /// The running key's socket, else the image (the default one of --name when no socket answers).
        /// Only an import may create a new image.
        func open(creating: Bool) throws -> any KeyAccess {
            if let flash {
                guard creating || access(flash, F_OK) == 0 else { throw ValidationError("no flash image at \(flash)") }
                return try ImageKeyAccess(path: flash)
            }
            let path = controlPath ?? KeyPaths.defaultControlPath(name: name)
            do {
                return SocketKeyAccess(connection: try ControlConnection(path: path))
            } catch {
                let image = KeyPaths.defaultImagePath(name: name)
                guard controlPath == nil, access(image, F_OK) == 0 else {
                    throw Unreachable("\(error); start the key, or name an image with --flash")
                }
                return try ImageKeyAccess(path: image)
            }
        }
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write every credential, private keys included, to a file of mode 0600."
        )

        @OptionGroup var key: KeyOptions

        @Option(help: "webdriver, cdp, playwright, selenium or cxf.")
        var format: Format = .webdriver

        @Option(name: .shortAndLong, help: "The file to write (it must not exist, unless --force); - for stdout.")
        var output: String

        @Flag(help: "Say what was exported as one JSON object ({exported, leftOut, format, file}).")
        var json = false

        @Flag(help: "Replace an existing file.")
        var force = false

        func validate() throws {
            if format == .auto { throw ValidationError("--format auto is for import: name the format to write") }
        }

        func run() throws {
            let store = try key.open(creating: false)
            let credentials = try store.list()
            var accountId = [UInt8](repeating: 0, count: 16)
            var generator = SystemRandomNumberGenerator()
            for i in accountId.indices { accountId[i] = UInt8.random(in: 0...255, using: &generator) }
            let fileFormat = format.file ?? .webdriver
            let (document, skipped) = CredentialExchange.write(
                credentials,
                format: fileFormat,
                accountId: accountId,
                timestamp: Int64(time(nil)),
                publicKey: {
                    try? P256.Signing.PrivateKey(derRepresentation: $0).publicKey.derRepresentation.map { $0 }
                }
            )
            var note = ""
            if skipped > 0 {
                note =
                    fileFormat == .cxf
                    ? " (\(skipped) non-discoverable left out: CXF holds passkeys only)"
                    : " (\(skipped) left out: Playwright holds discoverable P-256 credentials only)"
            }
            let count = credentials.count - skipped
            let summary = "exported \(count) credential\(count == 1 ? "" : "s")"
            let record = JSONValue.object([
                "exported": .integer(Int64(count)), "leftOut": .integer(Int64(skipped)),
                "format": .string(fileFormat.rawValue), "file": output == "-" ? .null : .string(output),
            ])
            if output == "-" {
                printLine(document.prettyEncoded)
                printError(json ? record.encoded : "fidosim: \(summary) (\(fileFormat.rawValue))\(note)")
                return
            }
            try usage { () throws(WholeFileError) in
                try WholeFile.writePrivate(output, document.prettyEncoded, replace: force)
            }
            printLine(
                json ? record.encoded : "fidosim: \(summary) to \(output) (\(fileFormat.rawValue), mode 0600)\(note)"
            )
        }
    }

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add the credentials of a webdriver or CXF file to a key."
        )

        @OptionGroup var key: KeyOptions

        @Option(help: "auto (recognised from the file), webdriver, cdp, playwright, selenium or cxf.")
        var format: Format = .auto

        @Argument(help: "The file to read; - for stdin.")
        var file: String

        @Flag(help: "Say what was imported as one JSON object ({imported, total, format, notPasskeys, failures}).")
        var json = false

        func run() throws {
            let text: [UInt8]
            if file == "-" {
                text = try usage { () throws(WholeFileError) in try WholeFile.readStandardInput() }
            } else {
                text = try usage { () throws(WholeFileError) in try WholeFile.read(file) }
            }
            let document: JSONValue
            do {
                document = try JSONParser.parse(text)
            } catch {
                throw ValidationError("\(file) is not JSON: \(error)")
            }
            let credentials: [JSONValue]
            let skipped: Int
            let readAs: CredentialFileFormat
            do {
                (credentials, readAs, skipped) = try CredentialExchange.read(document, format: format.file)
            } catch {
                throw ValidationError("\(file): \(error)")
            }
            let store = try key.open(creating: true)
            var imported = 0
            var failures: [String] = []
            var failureRecords: [JSONValue] = []
            for (index, credential) in credentials.enumerated() {
                let params = credential.objectValue ?? [:]
                do {
                    try store.add(.object(params))
                    imported += 1
                } catch {
                    failures.append("credential \(index + 1) (\(params["rpId"]?.stringValue ?? "?")): \(error)")
                    failureRecords.append([
                        "position": .integer(Int64(index + 1)), "rpId": params["rpId"] ?? .null,
                        "error": .string("\(error)"),
                    ])
                }
            }
            if json {
                printLine(
                    JSONValue.object([
                        "imported": .integer(Int64(imported)), "total": .integer(Int64(credentials.count)),
                        "format": .string(readAs.rawValue), "notPasskeys": .integer(Int64(skipped)),
                        "failures": .array(failureRecords),
                    ]).encoded
                )
                if !failures.isEmpty { throw Exit.failed }
                return
            }
            var line =
                "fidosim: imported \(imported) of \(credentials.count) credential\(credentials.count == 1 ? "" : "s")"
            if skipped > 0 { line += "; \(skipped) item\(skipped == 1 ? "" : "s") that are not passkeys left out" }
            printLine(line)
            for failure in failures { printError("fidosim: not imported: \(failure)") }
            if !failures.isEmpty { throw Exit.failed }
        }
    }
}

/// A control-protocol error, for the command line.
struct KeyAccessError: Error, CustomStringConvertible {
    var description: String
}

/// A key that is not running, through its flash image.
struct ImageKeyAccess: KeyAccess {
    let image: ImageKey

    init(path: String) throws {
        image = try ImageKey(path: path)
    }

    func request(_ command: String, _ params: JSONValue) throws -> JSONValue {
        do {
            return try image.request(command, params)
        } catch {
            throw KeyAccessError(description: error.description)
        }
    }
}

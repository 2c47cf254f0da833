import ArgumentParser
import Console
import ControlClient
import ControlProtocol
import HIDBridge

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
            WebDriver Credential Parameters, as `fidosim ctl getCredentials` shows them) and cxf (the FIDO \
            Alliance Credential Exchange Format 1.0; passkeys only).
            """,
        subcommands: [Export.self, Import.self]
    )

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case webdriver, cxf
    }

    struct KeyOptions: ParsableArguments {
        @Option(help: "The key's name: its control socket, or its default flash image when it is not running.")
        var name: String = "default"

        @Option(help: "The control socket of a running key.")
        var socket: String?

        @Option(help: "A flash image of a key that is not running.")
        var flash: String?

        func validate() throws {
            if socket != nil && flash != nil { throw ValidationError("give --socket or --flash, not both") }
        }

        /// The running key's socket, else the image (the default one of --name when no socket answers).
        /// Only an import may create a new image.
        func open(creating: Bool) throws -> any KeyAccess {
            if let flash {
                guard creating || access(flash, F_OK) == 0 else { throw ValidationError("no flash image at \(flash)") }
                return try ImageKeyAccess(path: flash)
            }
            let path = socket ?? KeyFiles.defaultControlPath(name: name)
            do {
                return SocketKeyAccess(connection: try ControlConnection(path: path))
            } catch {
                let image = KeyFiles.defaultImagePath(name: name)
                guard socket == nil, access(image, F_OK) == 0 else {
                    throw ValidationError("\(error); start the key, or name an image with --flash")
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

        @Option(help: "webdriver or cxf.")
        var format: Format = .webdriver

        @Option(name: .shortAndLong, help: "The file to write (it must not exist, unless --force).")
        var output: String

        @Flag(help: "Replace an existing file.")
        var force = false

        func run() throws {
            let store = try key.open(creating: false)
            let credentials = try store.list()
            let document: JSONValue
            var note = ""
            switch format {
            case .webdriver:
                document = ["credentials": .array(credentials)]
            case .cxf:
                var accountId = [UInt8](repeating: 0, count: 16)
                var generator = SystemRandomNumberGenerator()
                for i in accountId.indices { accountId[i] = UInt8.random(in: 0...255, using: &generator) }
                let (cxf, skipped) = CredentialExchange.cxf(
                    from: credentials,
                    accountId: accountId,
                    timestamp: Int64(time(nil))
                )
                document = cxf
                if skipped > 0 { note = " (\(skipped) non-discoverable left out: CXF holds passkeys only)" }
            }
            try usage { () throws(KeySetupError) in
                try KeyFiles.writePrivate(output, document.prettyEncoded, replace: force)
            }
            let count = format == .cxf ? credentials.count { $0["isResidentCredential"] == true } : credentials.count
            printLine(
                "fidosim: exported \(count) credential\(count == 1 ? "" : "s") to \(output) (\(format.rawValue), mode 0600)\(note)"
            )
        }
    }

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add the credentials of a webdriver or CXF file to a key."
        )

        @OptionGroup var key: KeyOptions

        @Option(help: "webdriver or cxf (default: recognised from the file).")
        var format: Format?

        @Argument(help: "The file to read.")
        var file: String

        func run() throws {
            let text = try usage { () throws(KeySetupError) in try KeyFiles.read(file) }
            let document: JSONValue
            do {
                document = try JSONParser.parse(text)
            } catch {
                throw ValidationError("\(file) is not JSON: \(error)")
            }
            let credentials: [JSONValue]
            var skipped = 0
            do {
                if (format ?? (CredentialExchange.isCXF(document) ? .cxf : .webdriver)) == .cxf {
                    (credentials, skipped) = try CredentialExchange.webDriverCredentials(fromCXF: document)
                } else {
                    credentials = try CredentialExchange.webDriverCredentials(fromFile: document)
                }
            } catch {
                throw ValidationError("\(file): \(error)")
            }
            let store = try key.open(creating: true)
            var imported = 0
            var failures: [String] = []
            for (index, credential) in credentials.enumerated() {
                // getCredentials adds the algorithm, which addCredential does not take (the key says it).
                var params = credential.objectValue ?? [:]
                params["algorithm"] = nil
                do {
                    try store.add(.object(params))
                    imported += 1
                } catch {
                    failures.append("credential \(index + 1) (\(params["rpId"]?.stringValue ?? "?")): \(error)")
                }
            }
            var line =
                "fidosim: imported \(imported) of \(credentials.count) credential\(credentials.count == 1 ? "" : "s")"
            if skipped > 0 { line += "; \(skipped) item\(skipped == 1 ? "" : "s") that are not passkeys left out" }
            printLine(line)
            for failure in failures { printError("fidosim: not imported: \(failure)") }
            if !failures.isEmpty { throw ExitCode(1) }
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

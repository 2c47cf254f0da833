import ArgumentParser
import Console
import ControlProtocol
import HIDBridge
import VirtualKey
import WebDriverFront

#if canImport(Glibc)
import Glibc
#endif

struct WebDriverCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webdriver",
        abstract: "A WebDriver endpoint whose virtual authenticators are real fidosim keys.",
        discussion: """
            Point a Selenium (or any W3C WebDriver) client at the URL it prints (http://127.0.0.1:PORT/SECRET, also \
            in the --ready-file as "webdriver") instead of the driver's: fidosim \
            starts the driver (chromedriver) in a private key tree, forwards it every request, and answers the \
            WebAuthn extension commands itself: Add Virtual Authenticator adds a real key to the tree (the browser \
            sees a security key arrive), Add Credential, Get Credentials, Remove Credential(s), Set User Verified \
            and Set Credential Properties are that key's control commands, Remove Virtual Authenticator unplugs it. \
            Only the key's user and root may connect. Every option of `serve` applies to the keys added; arguments \
            after -- go to the driver.
            """
    )

    @OptionGroup var serve: ServeOptions

    @Option(name: .customLong("webdriver-port"), help: "The port the WebDriver endpoint listens on (127.0.0.1).")
    var webdriverPort: UInt16 = 4444

    @Option(help: ArgumentHelp("The driver to start in the keys' tree.", valueName: "path"))
    var driver = "/usr/bin/chromedriver"

    @Flag(
        help: """
            Serve the endpoint at its bare URL (http://127.0.0.1:PORT) instead of under a secret path: then any \
            local program that finds the port is a WebDriver client of the owner's (the kernel still refuses \
            other users' connections).
            """
    )
    var noSecret = false

    @Argument(parsing: .postTerminator, help: ArgumentHelp("Arguments for the driver, after --.", valueName: "arg"))
    var driverArguments: [String] = []

    func validate() throws {
        guard serve.transport.allSatisfy({ $0 == .privateHID }) else {
            throw ValidationError("fidosim webdriver serves private keys: --transport is not for webdriver")
        }
        guard serve.hub == nil else { throw ValidationError("fidosim webdriver makes its own hub: not --hub") }
    }

    func run() throws {
        var serve = self.serve
        serve.keys = 0
        // The hub and the keys' control sockets in a directory of the owner's only.
        let temporary = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp"
        var template = Array("\(temporary)/fidosim-webdriver.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            printError("fidosim webdriver: cannot make a directory: \(String(cString: strerror(errno)))")
            throw Exit.failed
        }
        let directory = String(cString: made)
        serve.hub = directory + "/hub.sock"
        let driverPort = try Self.freePort()
        // The endpoint and the driver each under a secret path: finding a port is not enough to drive the browser.
        let pathPrefix = noSecret ? "" : "/" + WebDriverFront.secret()
        let driverPrefix = "/" + WebDriverFront.secret()
        if noSecret {
            printError(
                "fidosim webdriver: warning: --no-secret: any program of yours that finds the port drives the browser "
                    + "and its keys (a page cannot: requests with Origin or a foreign Host are refused)"
            )
        }
        let front: WebDriverFront
        do {
            front = try WebDriverFront(
                port: webdriverPort,
                driverPort: driverPort,
                hubPath: directory + "/hub.sock",
                access: PeerAccess(owner: geteuid()),
                pathPrefix: pathPrefix,
                driverPrefix: driverPrefix
            )
        } catch {
            printError("fidosim webdriver: \(error)")
            throw Exit.failed
        }
        let readyFile = serve.readyFile
        let endpoint = "http://127.0.0.1:\(front.port)" + pathPrefix
        try RunCommand.runInTree(
            serve: serve,
            command: [driver, "--port=\(driverPort)", "--url-base=\(driverPrefix)"] + driverArguments,
            readyExtra: [
                "webdriver": .string(endpoint), "driverPort": .integer(Int64(driverPort)),
                "driverUrlBase": .string(driverPrefix),
            ],
            readyLater: true
        ) { record in
            // The endpoint says it is ready once the driver answers.
            var waited = 0
            while !WebDriverFront.driverAnswers(port: driverPort) && waited < 300 {
                usleep(100_000)
                waited += 1
            }
            printLine(
                "fidosim: WebDriver endpoint \(endpoint) (the driver on 127.0.0.1:\(driverPort) under a secret path)"
            )
            // The record holds the endpoint's secret path: a folder no other user may write, or none.
            if let readyFile, (try? ServeSession.write(record, to: readyFile, secret: !noSecret)) == nil {
                // Stopped as by SIGTERM, which goes on to the driver: its end ends the run.
                kill(getpid(), SIGTERM)
                return
            }
            front.serve()
        }
        rmdir(directory)
    }

    /// A free TCP port on 127.0.0.1 for the driver.
    static func freePort() throws -> UInt16 {
        let fd = IPv4.streamSocket()
        defer { if fd >= 0 { close(fd) } }
        guard fd >= 0, IPv4.bindTo(fd, IPv4.address("127.0.0.1", port: 0)) else {
            printError("fidosim webdriver: no free port for the driver")
            throw Exit.failed
        }
        return IPv4.localPort(fd)
    }
}

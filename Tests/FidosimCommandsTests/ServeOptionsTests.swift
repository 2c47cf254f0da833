import ArgumentParser
import HIDBridge
import Profiles
import Testing
import VirtualKey

@testable import FidosimCommands

/// Every rule of `serve`'s options, as the command line meets it: the arguments, and the words its refusal has.
@Suite struct ServeOptionsTests {
    /// Parses `serve` with `arguments`; the refusal's message, or nil when the options pass.
    func refusal(_ arguments: [String]) -> String? {
        do {
            _ = try Fidosim.parseAsRoot(["serve"] + arguments)
            return nil
        } catch {
            return Fidosim.message(for: error)
        }
    }

    @Test(arguments: [
        (["--keys", "129"], "--keys must be 0 to 128"),
        (["--keys", "0"], "give --hub"),
        (["--hub", "/tmp/h.sock", "--transport", "usbip"], "private, uhid and UDP"),
        (["--env-file", "/tmp/e"], "--env-file is for --transport private"),
        (["--backup-state", "on", "--backup-eligible", "off"], "needs --backup-eligible on"),
        (["--reset-transports", "usb,usb"], "distinct transports"),
        (["--reset-transports", "wifi"], "distinct transports"),
        (["--pin-policy-url", ""], "1 to 256 bytes"),
        (["--busy-poll", "10001"], "--busy-poll must be 0 to 10000"),
        (["--config", "/tmp/c.json", "--keys", "2"], "not both"),
        (["--uv", "iris"], "unknown --uv 'iris'"),
        (["--max-msg-size", "1023"], "1024 to 7609"),
        (["--enrolled-fingers", "6"], "0 to 5"),
        (["--log-level", "loud"], "unknown --log-level"),
        (["--presence-delay", "600001"], "--presence-delay"),
        (["--presence", "maybe"], "unknown --presence 'maybe'"),
        (["--presence-timeout", "0"], "1 to 600 seconds"),
        (["--name", "a/b"], "--name must be"),
        (["--transport", "udp", "--transport", "uhid"], "--transport: one of"),
        (["--transport", "auto", "--transport", "pcsc"], "auto only alone"),
        (["--udp-reply-port", "0"], "1 to 65535"),
        (["--transport", "uhid", "--udp-reply-port", "7112"], "is for --transport udp"),
        (["--vpcd-port", "1"], "are for --transport pcsc"),
        (["--usbip-port", "1"], "are for --transport usbip"),
        (["--transport", "usbip", "--usbip-host", "10.0.0.1"], "--allow-remote"),
        (["--transport", "pcsc", "--vpcd-host", "10.0.0.1"], "--allow-remote"),
        (["--transport", "hid"], "needs --device"),
        (["--transport", "hid", "--device", "nonsense"], "expected VID:PID"),
        (["--transport", "hid", "--device", "1209:0001", "--keys", "2"], "one key through one device"),
        (["--device", "1209:0001"], "--device is for --transport hid"),
        (["--transport", "gadget", "--keys", "2"], "serves one key"),
        (["--udc", "dummy"], "--udc is for --transport gadget"),
        (["--hid-backend", "serial"], "hidraw or libusb"),
        (["--vendor-id", "0x10000"], "not a 16-bit id"),
        (["--product-id", "abc"], "not a 16-bit id"),
        (["--serial", String(repeating: "s", count: 64)], "1 to 63 bytes"),
        (["--host", "0.0.0.0"], "--allow-remote"),
    ])
    func eachRuleRefusesWhatItShould(arguments: [String], says: String) {
        let message = refusal(arguments)
        #expect(message?.contains(says) == true, "\(arguments): \(message ?? "accepted")")
    }

    @Test(arguments: [
        [], ["--keys", "0", "--hub", "/tmp/h.sock"], ["--transport", "uhid", "--transport", "pcsc"],
        ["--transport", "udp", "--transport", "usbip", "--usbip-port", "0"], ["--host", "0.0.0.0", "--allow-remote"],
        ["--transport", "private", "--env-file", "/tmp/e"], ["--presence", "delay:50", "--vendor-id", "4617"],
        ["--backup-eligible", "on", "--backup-state", "on"],
    ])
    func goodOptionsPass(arguments: [String]) {
        #expect(refusal(arguments) == nil, "\(arguments)")
    }

    @Test func theTransportsCombineOnce() throws {
        #expect(try TransportPlan([]) == TransportPlan(hid: .auto))
        #expect(try TransportPlan([.pcsc]) == TransportPlan(hid: .pcsc, card: true))
        #expect(try TransportPlan([.usbip]) == TransportPlan(hid: .usbip))
        #expect(try TransportPlan([.uhid, .usbip, .pcsc]) == TransportPlan(hid: .uhid, card: true, alsoUSBIP: true))
        #expect(try TransportPlan([.usbip]).forcing(.privateHID) == TransportPlan(hid: .privateHID, alsoUSBIP: true))
        #expect(throws: KeySetupError.self) { try TransportPlan([.pcsc, .pcsc]) }
        #expect(throws: KeySetupError.self) { try TransportPlan([.usbip, .usbip]) }
    }

    @Test func everySubcommandThatTalksToAKeyTakesControl() {
        for command in [
            ["ctl", "status"], ["credentials", "export", "--output", "-"], ["credentials", "import", "x.json"],
            ["conform", "--device", "udp:127.0.0.1:1"],
        ] {
            let parsed = try? Fidosim.parseAsRoot(command + ["--control", "/tmp/k.sock"])
            #expect(parsed != nil, "\(command)")
        }
    }
}

/// `serve`'s options reach the key they build: `keyFactory()` copies each one into `KeyFactory`.
@Suite struct ServeKeyFactoryTests {
    @Test func everyOptionOfTheKeyReachesTheFactory() throws {
        var serve = try ServeOptions.parse([])
        serve.presenceDelay = 7
        serve.presenceTimeout = 9
        serve.flashGeometry = .stm32l4
        serve.durability = .host
        serve.uhidPath = "/tmp/uhid"
        serve.deviceName = "a key"
        serve.vendorId = "0x1050"
        serve.productId = "1031"
        serve.udc = "dummy_udc.0"
        serve.device = "1209:0001"
        serve.hidBackend = "libusb"
        serve.host = "127.0.0.2"
        serve.anyLocalUser = true
        serve.udpPowerCycle = .off
        serve.udpReplyPort = 9
        serve.allowRemote = true
        serve.maxMsgSize = 2048
        serve.resetWindow = .off
        serve.minPinLengthRPs = ["a.example"]
        serve.enterpriseRPs = ["b.example"]
        serve.resetTransports = "usb,nfc"
        serve.vpcdHost = "127.0.0.3"
        serve.vpcdPort = 1
        serve.usbipHost = "127.0.0.4"
        serve.usbipPort = 2
        serve.pinPolicyUrl = "https://example.com/pin"
        serve.backupEligible = .on
        serve.backupState = .on
        let factory = serve.keyFactory()
        #expect(factory.presenceDelay == .milliseconds(7) && factory.presenceTimeout == .seconds(9))
        #expect(factory.vendorID == 0x1050 && factory.productID == 1031 && factory.identityGiven)
        #expect(factory.resetTransports == ["usb", "nfc"] && factory.backupEligible == true)
        // Each member differs from a factory's default: none was left uncopied. The manufacturer has no option.
        let defaults = Dictionary(
            Mirror(reflecting: KeyFactory()).children.map { ($0.label ?? "", String(describing: $0.value)) },
            uniquingKeysWith: { first, _ in first }
        )
        let same = Mirror(reflecting: factory).children.filter { child in
            defaults[child.label ?? ""] == String(describing: child.value)
        }
        #expect(same.map(\.label) == ["manufacturer"])
    }
}

package import FIDOClient

/// Runs checks against one key and collects a report.
package final class ConformanceRunner {
    package struct Options: Sendable {
        package var allowDestructive = false
        /// Only these groups (all when nil).
        package var groups: Set<CheckGroup>?
        /// The PIN the key already has.
        package var pin: String?
        /// The key is a card in a PC/SC reader: the NFC group runs and the CTAPHID group does not (for a HID key,
        /// the other way round). The group of the other binding is not run, not counted as skipped.
        package var card: Bool

        package init(
            allowDestructive: Bool = false,
            groups: Set<CheckGroup>? = nil,
            pin: String? = nil,
            card: Bool = false
        ) {
            self.allowDestructive = allowDestructive
            self.groups = groups
            self.pin = pin
            self.card = card
        }

        /// Whether checks of `group` apply to the key's binding.
        package func applies(_ group: CheckGroup) -> Bool {
            group != (card ? .hid : .nfc)
        }
    }

    let checks: [ConformanceCheck]
    let options: Options
    let open: () throws -> KeyLink
    let deviceOperator: any DeviceOperator
    let progress: (CheckResult) -> Void

    package init(
        checks: [ConformanceCheck] = ConformanceSuite.all,
        options: Options,
        deviceOperator: any DeviceOperator,
        open: @escaping () throws -> KeyLink,
        progress: @escaping (CheckResult) -> Void = { _ in }
    ) {
        self.checks = checks
        self.options = options
        self.deviceOperator = deviceOperator
        self.open = open
        self.progress = progress
    }

    /// The checks a run with these options takes, in order.
    package var selected: [ConformanceCheck] {
        let order = CheckGroup.allCases
        let chosen = checks.filter { (options.groups?.contains($0.group) ?? true) && options.applies($0.group) }
        let changesState = chosen.contains { $0.group != .hid && $0.group != .nfc && $0.group != .info }
        let start = options.allowDestructive && changesState ? [ConformanceSuite.blankStart] : []
        return start
            + chosen
            .enumerated()
            .sorted {
                let l = $0.offset == 0 && !start.isEmpty ? -1 : order.firstIndex(of: $0.element.group)!
                let r = $1.offset == 0 && !start.isEmpty ? -1 : order.firstIndex(of: $1.element.group)!
                return l != r ? l < r : $0.offset < $1.offset
            }
            .map(\.element)
    }

    package func run(device: String) throws -> ConformanceReport {
        let started = CTAPHIDClient.nowMs()
        let context = try ConformanceContext(
            open: open,
            deviceOperator: deviceOperator,
            allowDestructive: options.allowDestructive,
            pin: options.pin
        )
        try checkPIN(in: context)
        let identity = DeviceIdentity(address: device, info: context.info, hid: context.client.hid?.info)
        var results: [CheckResult] = []
        var gone = false
        /// The checks after which the key stopped answering until a power cycle.
        var hung: [String] = []
        for check in selected {
            var result: CheckResult
            if gone {
                result = CheckResult(
                    id: check.id,
                    group: check.group,
                    section: check.section,
                    title: check.title,
                    status: .skipped,
                    message: "not run: the key stopped answering",
                    expected: nil,
                    actual: nil,
                    milliseconds: 0
                )
            } else {
                result = run(check, in: context)
                if !context.recover() {
                    // The key hung: this check is where. A power cycle (the rig's, the control socket's, a person's)
                    // may bring it back, and the run goes on with the next check; else the rest are not run.
                    result.message = (result.message.map { $0 + "; " } ?? "") + "then the key stopped answering"
                    if (try? context.powerCycle()) != nil && context.recover() {
                        result.status = .failed
                        result.message! += "; it answered again after a power cycle, and the run went on"
                    } else {
                        gone = true
                    }
                    hung.append(check.id)
                }
                try? context.refreshInfo()
            }
            results.append(result)
            progress(result)
        }
        return ConformanceReport(
            device: identity,
            results: results,
            notes: context.notes,
            observations: context.observations,
            allowDestructive: options.allowDestructive,
            seconds: (CTAPHIDClient.nowMs() - started) / 1000,
            stoppedAnswering: gone,
            hungAfter: hung
        )
    }

    /// The PIN given for a key that has one is tried once, before anything else: getPINRetries, then one
    /// getPinToken. A wrong PIN stops the run there, having cost one retry, instead of every check that wants a
    /// token spending one until the key blocks PIN entry; a key with fewer than 3 retries left is not tried at all.
    func checkPIN(in context: ConformanceContext) throws {
        guard let pin = options.pin, context.info.hasPIN, context.speaksCTAP2 else { return }
        let retries = try PINChecks.retries(context)
        guard retries >= 3 else {
            throw ConformanceStop(
                "the key has \(retries) PIN retr\(retries == 1 ? "y" : "ies") left: the run stops before spending one "
                    + "(it needs at least 3); enter the right PIN in another client first"
            )
        }
        let status = try PINChecks.pinClient(context).token(pin: pin).response.status
        switch status {
        case CTAPStatusCode.ok:
            return
        case CTAPStatusCode.pinInvalid:
            throw ConformanceStop(
                "the PIN given is wrong (CTAP2_ERR_PIN_INVALID; the key has \(retries - 1) retries left): no check was run"
            )
        default:
            throw ConformanceStop(
                "the PIN given was refused: \(CTAPStatusCode.describe(status)); no check was run"
            )
        }
    }

    func unmet(_ requirement: Requirement, _ context: ConformanceContext) -> String? {
        let info = context.info
        switch requirement {
        case .destructive:
            return options.allowDestructive ? nil : "changes what the key holds: needs --allow-destructive"
        case .automaticOperator:
            return deviceOperator.isAutomatic
                ? nil : "needs a key whose touches the runner controls (a fidosim control socket)"
        case .version(let version):
            return info.versions.contains(version) ? nil : "getInfo does not list \(version)"
        case .option(let name):
            return info.options[name] != nil ? nil : "getInfo has no option \(name)"
        case .optionTrue(let name):
            return info.options[name] == true ? nil : "getInfo's option \(name) is not true"
        case .extension(let name):
            return info.extensions.contains(name) ? nil : "getInfo does not list the extension \(name)"
        case .knownPIN:
            if !info.hasPIN { return "the key has no PIN (client-pin.set sets one with --allow-destructive)" }
            return context.pin == nil ? "the key has a PIN the runner does not know: give it with --pin" : nil
        case .spendsPINRetries(let spent):
            guard let retries = try? PINChecks.retries(context) else { return "getPINRetries did not answer" }
            return retries - spent >= 3
                ? nil : "it would leave \(retries - spent) PIN retries (the key has \(retries)); a run keeps at least 3"
        case .u2fTransport:
            if let card = context.client.card {
                return card.version == "U2F_V2" ? nil : "SELECT answered \(card.version): the card has no U2F"
            }
            return context.client.hid?.info?.noMessage == false
                ? nil : "CTAPHID_INIT's capabilities say NMSG (no CTAPHID_MSG)"
        case .u2fRegistration:
            return info.options["alwaysUv"] == true
                ? "alwaysUv is on: the key switches U2F registration and authentication off (CTAP 2.1 §6.11.2)" : nil
        }
    }

    func run(_ check: ConformanceCheck, in context: ConformanceContext) -> CheckResult {
        var result = CheckResult(
            id: check.id,
            group: check.group,
            section: check.section,
            title: check.title,
            status: .passed,
            message: nil,
            expected: nil,
            actual: nil,
            milliseconds: 0
        )
        if check.group == .hid && context.isCard {
            result.status = .skipped
            result.message = "the key is a card in a PC/SC reader: CTAPHID is for HID keys"
            return result
        }
        if check.group == .nfc && !context.isCard {
            result.status = .skipped
            result.message = "the key is a HID key: the NFC binding is for cards (--device pcsc:READER)"
            return result
        }
        let ctap2 = check.group != .hid && check.group != .u2f && check.group != .nfc
        if ctap2 && !context.speaksCTAP2 {
            result.status = .skipped
            result.message = "the key does not speak CTAP2 (no CBOR capability at CTAPHID_INIT)"
            return result
        }
        if let reason = check.requirements.lazy.compactMap({ self.unmet($0, context) }).first {
            result.status = .skipped
            result.message = reason
            return result
        }
        let start = CTAPHIDClient.nowMs()
        do {
            try check.run(context)
        } catch let failure as CheckFailure {
            result.status = .failed
            result.message = failure.message
            result.expected = failure.expected
            result.actual = failure.actual
        } catch let skip as CheckSkip {
            result.status = .skipped
            result.message = skip.reason
        } catch {
            result.status = .failed
            result.message = "\(error)"
        }
        result.milliseconds = CTAPHIDClient.nowMs() - start
        try? context.deviceOperator.restore()
        return result
    }
}

import FIDOClient

/// The groups checks belong to, in the order a run takes them.
package enum CheckGroup: String, CaseIterable, Sendable, Codable {
    case hid
    case nfc
    case info
    case u2f
    case makeCredential = "make-credential"
    case getAssertion = "get-assertion"
    case selection
    case clientPIN = "client-pin"
    case credentialManagement = "credential-management"
    case largeBlobs = "large-blobs"
    case config
    case extensions
    case reset

    package var title: String {
        switch self {
        case .hid: "CTAPHID transport"
        case .nfc: "NFC binding (ISO 7816-4 APDUs)"
        case .info: "authenticatorGetInfo"
        case .u2f: "U2F (CTAP1)"
        case .makeCredential: "authenticatorMakeCredential"
        case .getAssertion: "authenticatorGetAssertion and GetNextAssertion"
        case .selection: "authenticatorSelection"
        case .clientPIN: "authenticatorClientPIN"
        case .credentialManagement: "authenticatorCredentialManagement"
        case .largeBlobs: "authenticatorLargeBlobs"
        case .config: "authenticatorConfig"
        case .extensions: "Extensions"
        case .reset: "authenticatorReset"
        }
    }
}

/// What a check needs before it can run; a check whose needs are not met is skipped, saying which.
package enum Requirement: Sendable, Equatable {
    /// It erases or changes what the key holds (reset, a PIN, lockout, stored credentials): `--allow-destructive`.
    case destructive
    /// It needs the key to refuse a touch or to be held waiting, which only a control socket can do in reasonable time.
    case automaticOperator
    /// getInfo lists this version.
    case version(String)
    /// getInfo's options has this option (true or false).
    case option(String)
    /// getInfo's options has this option set to true.
    case optionTrue(String)
    /// getInfo lists this extension.
    case `extension`(String)
    /// A PIN is set and the runner knows it.
    case knownPIN
    /// It sends this many wrong PINs: it runs only when the key then still has at least 3 retries left, so that a
    /// run never blocks a key's PIN (the destructive lockout checks excepted).
    case spendsPINRetries(Int)
    /// CTAPHID_INIT's capabilities allow CTAPHID_MSG.
    case u2fTransport
    /// U2F registration and authentication are on: not with alwaysUv, which switches them off (CTAP 2.1 §6.11.2).
    case u2fRegistration
}

/// A check fails with what was expected and what came back.
package struct CheckFailure: Error, Sendable {
    package var message: String
    package var expected: String?
    package var actual: String?

    package init(_ message: String, expected: String? = nil, actual: String? = nil) {
        self.message = message
        self.expected = expected
        self.actual = actual
    }
}

/// A check decides at run time that it cannot apply to this key.
package struct CheckSkip: Error, Sendable {
    package var reason: String
    package init(_ reason: String) { self.reason = reason }
}

/// One conformance check: what it tests, where the spec says so, and how.
package struct ConformanceCheck: Sendable {
    package var id: String
    package var group: CheckGroup
    /// The section of the specification that states the behaviour, e.g. "CTAP 2.1 §11.2.9.1.3".
    package var section: String
    package var title: String
    package var requirements: [Requirement]
    package var run: @Sendable (ConformanceContext) throws -> Void

    package init(
        _ id: String,
        _ group: CheckGroup,
        _ section: String,
        _ title: String,
        requires requirements: [Requirement] = [],
        run: @escaping @Sendable (ConformanceContext) throws -> Void
    ) {
        self.id = id
        self.group = group
        self.section = section
        self.title = title
        self.requirements = requirements
        self.run = run
    }
}

package enum CheckStatus: String, Sendable, Codable {
    case passed
    case failed
    case skipped
}

/// The outcome of one check.
package struct CheckResult: Sendable {
    package var id: String
    package var group: CheckGroup
    package var section: String
    package var title: String
    package var status: CheckStatus
    package var message: String?
    package var expected: String?
    package var actual: String?
    package var milliseconds: Double

    /// The result as `fidosim conform` prints it: the verdict, the check and its section, then why.
    package var line: String {
        let mark =
            switch status {
            case .passed: "pass"
            case .failed: "FAIL"
            case .skipped: "skip"
            }
        var line = "\(mark)  \(id)  (\(section))"
        if let message { line += ": \(message)" }
        if let expected {
            line += " [expected \(expected)" + (actual.map { ", got \($0)" } ?? "") + "]"
        } else if let actual {
            line += " [got \(actual)]"
        }
        return line
    }
}

/// Why a run stops before its checks: a wrong PIN, too few PIN retries left. Nothing else was sent to the key.
package struct ConformanceStop: Error, Sendable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

import ControlProtocol

/// What the front changes in a New Session request for Chromium: its network service runs in the browser process.
///
/// Why: umockdev's preload library (the private tree) takes a lock in every file function it wraps and has no fork
/// handler, so a child that Chromium forks while another thread holds it hangs before it starts its program (seen
/// in 2 of 60 starts with Playwright, 5 of 100 with chromedriver: the network service). In the browser process the
/// network service is no fork, and no start hung in 150 (tools/python/examples/browser). The feature joins the
/// test's own `--enable-features`, if it gives one (Chromium keeps only the last).
package enum NewSession {
    package static let feature = "NetworkServiceInProcess2"

    /// The request's body with the feature in `goog:chromeOptions` of `alwaysMatch` and of each `firstMatch` that
    /// names Chromium's options; nil when the body is not a W3C New Session request (it goes on unchanged).
    package static func adjusted(_ body: [UInt8]) -> [UInt8]? {
        guard let value = try? JSONParser.parse(body), case .object(var request) = value,
            case .object(var capabilities)? = request["capabilities"]
        else { return nil }
        var always = capabilities["alwaysMatch"]?.objectValue ?? [:]
        let firstMatch = capabilities["firstMatch"]?.arrayValue ?? []
        let chromeInFirst = firstMatch.contains { $0["goog:chromeOptions"] != nil }
        if always["goog:chromeOptions"] != nil || !chromeInFirst {
            always["goog:chromeOptions"] = withFeature(always["goog:chromeOptions"])
            capabilities["alwaysMatch"] = .object(always)
        }
        if chromeInFirst {
            capabilities["firstMatch"] = .array(
                firstMatch.map { entry in
                    guard case .object(var members) = entry, members["goog:chromeOptions"] != nil else { return entry }
                    members["goog:chromeOptions"] = withFeature(members["goog:chromeOptions"])
                    return .object(members)
                }
            )
        }
        request["capabilities"] = .object(capabilities)
        return Array(JSONValue.object(request).encoded.utf8)
    }

    static func withFeature(_ options: JSONValue?) -> JSONValue {
        var members = options?.objectValue ?? [:]
        var args = (members["args"]?.arrayValue ?? []).compactMap(\.stringValue)
        if let index = args.lastIndex(where: { $0.hasPrefix("--enable-features=") }) {
            let features = args[index].dropFirst("--enable-features=".count).split(separator: ",").map(String.init)
            if !features.contains(feature) {
                args[index] = "--enable-features=" + (features + [feature]).joined(separator: ",")
            }
        } else {
            args.append("--enable-features=" + feature)
        }
        members["args"] = .array(args.map { .string($0) })
        return .object(members)
    }
}

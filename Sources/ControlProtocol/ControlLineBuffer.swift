/// Splits a control connection's byte stream into request lines of at most ``maxLineLength`` bytes.
///
/// A longer line is reported once as ``Item/tooLarge`` and its bytes are skipped up to the next newline, so a
/// client that sent too much can go on with its next request.
package struct ControlLineBuffer: Sendable {
    /// 1 MiB, the newline not counted.
    package static let maxLineLength = 1 << 20

    package enum Item: Equatable, Sendable {
        case line([UInt8])
        case tooLarge
    }

    let maxLineLength: Int
    var pending: [UInt8] = []
    var skipping = false

    package init(maxLineLength: Int = ControlLineBuffer.maxLineLength) {
        self.maxLineLength = maxLineLength
    }

    /// Adds received bytes; returns the complete lines (without the newline, a trailing CR dropped) and
    /// over-long ones, in order. Empty lines are ignored.
    package mutating func append(_ bytes: some Collection<UInt8>) -> [Item] {
        var items: [Item] = []
        for byte in bytes {
            if byte == 0x0A {
                if skipping {
                    skipping = false
                } else {
                    if pending.last == 0x0D { pending.removeLast() }
                    if !pending.isEmpty { items.append(.line(pending)) }
                }
                pending.removeAll(keepingCapacity: true)
                continue
            }
            if skipping { continue }
            pending.append(byte)
            if pending.count > maxLineLength {
                items.append(.tooLarge)
                skipping = true
                pending = []
            }
        }
        return items
    }
}

/// The JSON lines a server writes.
package enum ControlMessage {
    /// `{"id":…,"ok":true,"result":…}`
    package static func success(id: JSONValue, result: JSONValue) -> String {
        JSONValue.object(["id": id, "ok": true, "result": result]).encoded
    }

    /// `{"id":…,"ok":false,"error":{"code":…,"message":…}}`; the id is null when the request had none.
    package static func failure(id: JSONValue?, error: ControlError) -> String {
        JSONValue.object([
            "id": id ?? .null, "ok": false,
            "error": ["code": .string(error.code.rawValue), "message": .string(error.message)],
        ]).encoded
    }

    /// `{"event":name,…}`
    package static func event(_ name: String, _ fields: [String: JSONValue]) -> String {
        var members = fields
        members["event"] = .string(name)
        return JSONValue.object(members).encoded
    }
}

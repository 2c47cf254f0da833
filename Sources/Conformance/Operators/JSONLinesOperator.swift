import ControlProtocol

#if canImport(Glibc)
import Glibc
#endif

/// `--operator stdio-json`: each request for a person is one JSON line on standard output, for a harness to act on
/// (firmware-spec/conformance.md, "Hardware in the loop").
///
/// `{"operator": "touch"|"refuse"|"hold"|"replug", "id": N, "what": TEXT}`. A touch and a hold are told, not
/// answered: the harness touches while the key waits (the request follows the line at once), or leaves the key
/// alone. A refusal and a replug wait for the harness's answer on standard input, one JSON line with the same id:
/// `{"id": N, "done": true}` (it refuses the next request, which is then not told as a touch / replugged), or `{"id": N, "done": false, "reason": TEXT}`
/// (it cannot: the check is skipped, or for a replug it fails).
package final class JSONLinesOperator: DeviceOperator {
    var next = 0
    /// After a refusal the harness answers the next request that needs a touch: it is not told to touch it.
    var refusing = false
    let readLine: () -> String?

    package init(readLine: @escaping () -> String? = { Swift.readLine() }) {
        self.readLine = readLine
    }

    package var isAutomatic: Bool { true }

    package func touchNeeded(_ what: String) throws {
        if refusing {
            refusing = false
            return
        }
        tell("touch", what)
    }

    package func refuseNextTouch() throws {
        let (done, reason) = try ask("refuse", "refuse the next request that asks for a touch")
        if !done { throw CheckSkip("the operator cannot refuse a touch\(reason.map { ": \($0)" } ?? "")") }
        refusing = true
    }

    package func holdTouch() throws { tell("hold", "leave the key alone: the next request waits for a touch") }

    package func restore() throws { refusing = false }

    package func powerCycle() throws {
        let (done, reason) = try ask("replug", "unplug the key and plug it back in")
        if !done { throw CheckFailure("the operator did not replug the key\(reason.map { ": \($0)" } ?? "")") }
    }

    @discardableResult
    func tell(_ action: String, _ what: String) -> Int {
        next += 1
        let line: JSONValue = ["operator": .string(action), "id": .integer(Int64(next)), "what": .string(what)]
        print(line.encoded)
        fflush(nil)
        return next
    }

    /// Tells the harness, then reads lines until the one that answers this request.
    func ask(_ action: String, _ what: String) throws -> (Bool, String?) {
        let id = tell(action, what)
        while let text = readLine() {
            guard let answer = try? JSONParser.parse(text), answer["id"]?.integerValue == Int64(id) else { continue }
            guard let done = answer["done"]?.boolValue else {
                throw CheckFailure("the operator's answer to \(action) \(id) has no boolean \"done\": \(text)")
            }
            return (done, answer["reason"]?.stringValue)
        }
        throw CheckFailure("no answer from the operator to \(action) \(id): standard input closed")
    }
}

import ControlProtocol

/// One HTTP/1.1 message as the WebDriver front reads and writes it: a request from a WebDriver client, a response
/// from the driver. Bodies have a Content-Length (WebDriver clients and chromedriver send one); a chunked body is
/// refused with a clear status rather than misread.
///
/// Pure: bytes in, a message (or how many more bytes are needed) out.
package struct HTTPMessage: Equatable, Sendable {
    /// `GET /status HTTP/1.1` (a request) or `HTTP/1.1 200 OK` (a response), split at its first two spaces.
    package var startLine: [String]
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]

    package static func == (a: HTTPMessage, b: HTTPMessage) -> Bool {
        a.startLine == b.startLine && a.body == b.body && a.headers.map(\.name) == b.headers.map(\.name)
            && a.headers.map(\.value) == b.headers.map(\.value)
    }

    package init(startLine: [String], headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.startLine = startLine
        self.headers = headers
        self.body = body
    }

    /// The most a head (start line and headers) may be, and a body: a driver's answer (a screenshot, a page's
    /// source) may be large; a client's request is bounded tighter (``maxRequestBody``).
    package static let maxHead = 64 << 10
    package static let maxBody = 256 << 20
    /// The most a WebDriver client's request body may be (an uploaded file included).
    package static let maxRequestBody = 16 << 20

    package enum ParseError: Error, Equatable, CustomStringConvertible {
        case malformed(String)
        case tooLarge(String)
        case unsupported(String)

        package var description: String {
            switch self {
            case .malformed(let why), .tooLarge(let why), .unsupported(let why): why
            }
        }
    }

    /// The message at the start of `bytes` and how many bytes it took; nil when more bytes are needed.
    package static func parse(_ bytes: [UInt8], maxBody: Int = maxBody) throws(ParseError) -> (HTTPMessage, Int)? {
        guard let headEnd = find([13, 10, 13, 10], in: bytes) else {
            if bytes.count > maxHead { throw .tooLarge("the request's head is longer than \(maxHead) bytes") }
            return nil
        }
        guard headEnd <= maxHead else { throw .tooLarge("the request's head is longer than \(maxHead) bytes") }
        guard let head = String(validating: bytes[..<headEnd], as: UTF8.self) else {
            throw .malformed("the head is not UTF-8")
        }
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let first = lines.removeFirst()
        let parts = first.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw .malformed("not an HTTP start line: \(first.prefix(80))")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                throw .malformed("not a header line: \(line.prefix(80))")
            }
            let name = String(line[..<colon])
            guard name.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else { throw .malformed("a header name has blanks") }
            let value = String(line[line.index(after: colon)...]).trimmingBlanks()
            headers.append((name, value))
        }
        var message = HTTPMessage(startLine: parts, headers: headers)
        if let encoding = message.header("Transfer-Encoding"), encoding.lowercased() != "identity" {
            throw .unsupported("Transfer-Encoding \(encoding) (send a Content-Length)")
        }
        var length = 0
        if let text = message.header("Content-Length") {
            guard let value = Int(text), value >= 0 else { throw .malformed("Content-Length \(text.prefix(20))") }
            guard value <= maxBody else { throw .tooLarge("a body of \(value) bytes (at most \(maxBody))") }
            length = value
        }
        let start = headEnd + 4
        guard bytes.count - start >= length else { return nil }
        message.body = Array(bytes[start..<start + length])
        return (message, start + length)
    }

    /// The first value of a header (names compared without case).
    package func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name.lowercased() == lower }?.value
    }

    /// The message as bytes, with `Content-Length` for its body and `Connection: close`, whatever it had of either.
    package var bytes: [UInt8] {
        var head = startLine.joined(separator: " ") + "\r\n"
        for (name, value) in headers
        where !["content-length", "connection", "keep-alive", "transfer-encoding"].contains(name.lowercased()) {
            head += "\(name): \(value)\r\n"
        }
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    /// A response with a JSON body.
    /// Why a request cannot be a WebDriver client's, if it cannot: a browser adds `Origin` to a page's cross-site
    /// request (a form or `fetch` from a site the owner visits), and a page whose name was rebound to 127.0.0.1 sends
    /// its own name as `Host`. A WebDriver client sends neither; it names the endpoint it connected to.
    package func browserRefusal(port: UInt16) -> String? {
        if let origin = header("origin") {
            return "a web page's request (Origin: \(origin.prefix(80))): a browser page is never a WebDriver client"
        }
        guard let host = header("host") else { return "no Host header" }
        let endpoint = ["127.0.0.1", "localhost", "[::1]"].map { "\($0):\(port)" }
        guard endpoint.contains(host.lowercased()) else {
            return "Host \(host.prefix(80)) is not this endpoint (127.0.0.1:\(port)): a page rebound to this address?"
        }
        return nil
    }

    package static func response(status: Int, reason: String, json: String) -> HTTPMessage {
        HTTPMessage(
            startLine: ["HTTP/1.1", "\(status)", reason],
            headers: [("Content-Type", "application/json; charset=utf-8"), ("Cache-Control", "no-cache")],
            body: Array(json.utf8)
        )
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if Array(haystack[start..<start + needle.count]) == needle { return start }
        }
        return nil
    }
}

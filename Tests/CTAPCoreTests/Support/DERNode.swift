import Crypto

/// One DER TLV, with its children when it is constructed.
struct DERNode {
    var tag: UInt8
    /// The whole encoding: tag, length and content.
    var encoded: [UInt8]
    var content: [UInt8]
    var children: [DERNode]

    /// Parses exactly one DER element spanning all of `bytes`.
    init(parsing bytes: [UInt8]) throws {
        var index = 0
        self = try DERNode.read(bytes, &index)
        guard index == bytes.count else { throw HarnessFailure("\(bytes.count - index) bytes after the DER element") }
    }

    private init(tag: UInt8, encoded: [UInt8], content: [UInt8], children: [DERNode]) {
        self.tag = tag
        self.encoded = encoded
        self.content = content
        self.children = children
    }

    /// The length of the DER element at the start of `bytes`, read from its header only.
    static func elementLength(_ bytes: ArraySlice<UInt8>) throws -> Int {
        let (headerLength, contentLength) = try header(bytes)
        return headerLength + contentLength
    }

    /// The header length and the content length of the element at the start of `bytes`; only definite,
    /// shortest-form lengths.
    private static func header(_ bytes: ArraySlice<UInt8>) throws -> (Int, Int) {
        let start = bytes.startIndex
        guard bytes.count >= 2 else { throw HarnessFailure("DER header truncated") }
        guard bytes[start] & 0x1F != 0x1F else { throw HarnessFailure("multi-byte DER tags are not expected") }
        let first = bytes[start + 1]
        if first < 0x80 { return (2, Int(first)) }
        let count = Int(first & 0x7F)
        guard (1...2).contains(count), bytes.count >= 2 + count else { throw HarnessFailure("bad DER length") }
        let length = bytes[(start + 2)..<(start + 2 + count)].reduce(0) { $0 << 8 | Int($1) }
        guard length >= 0x80, count == 1 || length > 0xFF else { throw HarnessFailure("non-minimal DER length") }
        return (2 + count, length)
    }

    private static func read(_ bytes: [UInt8], _ index: inout Int) throws -> DERNode {
        let (headerLength, contentLength) = try header(bytes[index...])
        let start = index
        let contentStart = start + headerLength
        guard bytes.count - contentStart >= contentLength else { throw HarnessFailure("DER content truncated") }
        let end = contentStart + contentLength
        let tag = bytes[start]
        var children: [DERNode] = []
        if tag & 0x20 != 0 {
            let content = Array(bytes[contentStart..<end])
            var inner = 0
            while inner < content.count {
                children.append(try read(content, &inner))
            }
        }
        index = end
        return DERNode(
            tag: tag,
            encoded: Array(bytes[start..<end]),
            content: Array(bytes[contentStart..<end]),
            children: children
        )
    }
}

/// The parts of an X.509 certificate the U2F tests look at.
struct ParsedCertificate {
    var tbs: DERNode
    var subjectPublicKey: P256.Signing.PublicKey
    var signature: [UInt8]

    /// Parses `Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue BIT STRING }`.
    init(_ der: [UInt8]) throws {
        let root = try DERNode(parsing: der)
        guard root.tag == 0x30, root.children.count == 3 else { throw HarnessFailure("not a certificate") }
        tbs = root.children[0]
        let bitString = root.children[2]
        guard tbs.tag == 0x30, root.children[1].tag == 0x30, bitString.tag == 0x03, bitString.content.first == 0
        else { throw HarnessFailure("malformed certificate") }
        // tbsCertificate: [0] version, serial, signature, issuer, validity, subject, subjectPublicKeyInfo.
        guard tbs.children.count >= 7, tbs.children[0].tag == 0xA0, tbs.children[1].tag == 0x02,
            tbs.children[6].tag == 0x30
        else { throw HarnessFailure("malformed tbsCertificate") }
        subjectPublicKey = try P256.Signing.PublicKey(derRepresentation: tbs.children[6].encoded)
        signature = Array(bitString.content.dropFirst())
    }
}

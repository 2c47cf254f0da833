/// Raw DEFLATE (RFC 1951), as the large-blob array holds blobs: stored blocks to write, a full decoder to read
/// what platforms compressed.
package enum Deflate {
    /// Why a stream does not inflate.
    package struct Failure: Error, Equatable, Sendable {
        package var reason: String
    }

    /// `data` as DEFLATE stored blocks (any inflater reads them; no compression).
    package static func store(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var offset = 0
        repeat {
            let length = min(65535, data.count - offset)
            let final: UInt8 = offset + length == data.count ? 1 : 0
            out.append(final)  // BFINAL, BTYPE 00, padding to the byte
            out += [UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF)]
            out += data[offset..<offset + length]
            offset += length
        } while offset < data.count
        return out
    }

    /// Decodes a raw DEFLATE stream of at most `maxOutput` bytes. Never traps on input.
    package static func inflate(_ data: [UInt8], maxOutput: Int) throws(Failure) -> [UInt8] {
        var reader = BitReader(bytes: data)
        var out: [UInt8] = []
        while true {
            let final = try reader.bits(1)
            let type = try reader.bits(2)
            switch type {
            case 0:
                reader.alignToByte()
                let length = try reader.bits(16)
                let complement = try reader.bits(16)
                guard length == ~complement & 0xFFFF else { throw Failure(reason: "stored block length mismatch") }
                guard out.count + length <= maxOutput else { throw Failure(reason: "output longer than \(maxOutput)") }
                out += try reader.bytes(length)
            case 1:
                try inflateBlock(&reader, &out, literals: Self.fixedLiterals, distances: Self.fixedDistances, maxOutput)
            case 2:
                let (literals, distances) = try readDynamicTables(&reader)
                try inflateBlock(&reader, &out, literals: literals, distances: distances, maxOutput)
            default:
                throw Failure(reason: "reserved block type")
            }
            if final == 1 { return out }
        }
    }

    struct BitReader {
        let bytes: [UInt8]
        var position = 0
        var bitBuffer: UInt32 = 0
        var bitCount = 0

        mutating func bits(_ n: Int) throws(Failure) -> Int {
            while bitCount < n {
                guard position < bytes.count else { throw Failure(reason: "truncated stream") }
                bitBuffer |= UInt32(bytes[position]) << UInt32(bitCount)
                position += 1
                bitCount += 8
            }
            let value = Int(bitBuffer & ((1 << UInt32(n)) - 1))
            bitBuffer >>= UInt32(n)
            bitCount -= n
            return value
        }

        mutating func alignToByte() {
            bitBuffer = 0
            bitCount = 0
        }

        mutating func bytes(_ n: Int) throws(Failure) -> ArraySlice<UInt8> {
            guard bytes.count - position >= n else { throw Failure(reason: "truncated stored block") }
            defer { position += n }
            return bytes[position..<position + n]
        }
    }

    /// A canonical Huffman code: counts of codes per length and the symbols in code order.
    struct Huffman {
        var counts: [Int]
        var symbols: [Int]

        init(lengths: [Int]) throws(Failure) {
            counts = Array(repeating: 0, count: 16)
            for length in lengths { counts[length] += 1 }
            counts[0] = 0
            var left = 1
            for length in 1...15 {
                left = left * 2 - counts[length]
                guard left >= 0 else { throw Failure(reason: "over-subscribed code") }
            }
            var offsets = Array(repeating: 0, count: 16)
            for length in 1..<15 { offsets[length + 1] = offsets[length] + counts[length] }
            symbols = Array(repeating: 0, count: lengths.count)
            for (symbol, length) in lengths.enumerated() where length != 0 {
                symbols[offsets[length]] = symbol
                offsets[length] += 1
            }
        }

        func decode(_ reader: inout BitReader) throws(Failure) -> Int {
            var code = 0
            var first = 0
            var index = 0
            for length in 1...15 {
                code |= try reader.bits(1)
                let count = counts[length]
                if code - first < count { return symbols[index + code - first] }
                index += count
                first = (first + count) << 1
                code <<= 1
            }
            throw Failure(reason: "invalid Huffman code")
        }
    }

    static let lengthBase = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227,
        258,
    ]
    static let lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    static let distanceBase = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
        6145, 8193, 12289, 16385, 24577,
    ]
    static let distanceExtra = [
        0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
    ]

    static let fixedLiterals: Huffman = {
        var lengths = Array(repeating: 8, count: 288)
        for i in 144..<256 { lengths[i] = 9 }
        for i in 256..<280 { lengths[i] = 7 }
        return try! Huffman(lengths: lengths)  // a constant, valid code
    }()
    static let fixedDistances: Huffman = try! Huffman(lengths: Array(repeating: 5, count: 30))

    static func readDynamicTables(_ reader: inout BitReader) throws(Failure) -> (Huffman, Huffman) {
        let literalCount = try reader.bits(5) + 257
        let distanceCount = try reader.bits(5) + 1
        let codeLengthCount = try reader.bits(4) + 4
        guard literalCount <= 286, distanceCount <= 30 else { throw Failure(reason: "too many codes") }
        let order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]
        var codeLengths = Array(repeating: 0, count: 19)
        for i in 0..<codeLengthCount { codeLengths[order[i]] = try reader.bits(3) }
        let codeLengthCode = try Huffman(lengths: codeLengths)
        var lengths: [Int] = []
        while lengths.count < literalCount + distanceCount {
            let symbol = try codeLengthCode.decode(&reader)
            switch symbol {
            case 0...15: lengths.append(symbol)
            case 16:
                guard let previous = lengths.last else { throw Failure(reason: "repeat without a length") }
                lengths += Array(repeating: previous, count: 3 + (try reader.bits(2)))
            case 17: lengths += Array(repeating: 0, count: 3 + (try reader.bits(3)))
            default: lengths += Array(repeating: 0, count: 11 + (try reader.bits(7)))
            }
        }
        guard lengths.count == literalCount + distanceCount else { throw Failure(reason: "code lengths overrun") }
        guard lengths[256] != 0 else { throw Failure(reason: "no end-of-block code") }
        return (
            try Huffman(lengths: Array(lengths[0..<literalCount])),
            try Huffman(lengths: Array(lengths[literalCount...]))
        )
    }

    static func inflateBlock(
        _ reader: inout BitReader,
        _ out: inout [UInt8],
        literals: Huffman,
        distances: Huffman,
        _ maxOutput: Int
    ) throws(Failure) {
        while true {
            let symbol = try literals.decode(&reader)
            if symbol < 256 {
                guard out.count < maxOutput else { throw Failure(reason: "output longer than \(maxOutput)") }
                out.append(UInt8(symbol))
            } else if symbol == 256 {
                return
            } else {
                let index = symbol - 257
                guard index < 29 else { throw Failure(reason: "invalid length symbol") }
                let length = lengthBase[index] + (try reader.bits(lengthExtra[index]))
                let distanceSymbol = try distances.decode(&reader)
                guard distanceSymbol < 30 else { throw Failure(reason: "invalid distance symbol") }
                let distance = distanceBase[distanceSymbol] + (try reader.bits(distanceExtra[distanceSymbol]))
                guard distance <= out.count else { throw Failure(reason: "distance before the start") }
                guard out.count + length <= maxOutput else { throw Failure(reason: "output longer than \(maxOutput)") }
                let start = out.count - distance
                for i in 0..<length { out.append(out[start + i]) }
            }
        }
    }
}

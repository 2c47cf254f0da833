/// Decodes untrusted bytes into a ``CBORValue``, accepting only the CTAP2 subset of CBOR.
///
/// The decoder reads through a bounds-checked cursor and never traps on input. It does not recurse: nested
/// containers are tracked on an explicit stack whose height is limited by `maxDepth`. It never allocates based
/// on an unchecked length: a string's length and a container's element count are checked against the bytes
/// that remain before anything is read, and containers grow only as their elements are actually decoded.
///
/// It rejects, with a ``CBORDecodingError``:
/// - input that ends early (``CBORDecodingError/Code/truncated``) or has bytes after the item
///   (``CBORDecodingError/Code/trailingBytes``);
/// - containers nested deeper than `maxDepth`, where a top-level array or map has depth 1;
/// - indefinite lengths, a lone "break", and the reserved additional information values 28–30;
/// - integers, lengths, counts and simple values not in their shortest form;
/// - duplicate map keys and text strings that are not well-formed UTF-8;
/// - tags, floats and simple values other than `false`, `true`, `null` and `undefined`.
///
/// It accepts map keys in any order. Use `isCanonical(_:maxDepth:)` to also require CTAP2
/// canonical key order.
///
/// Text keys are compared with Swift `String` equality, so two keys whose UTF-8 differs but which are
/// canonically equivalent Unicode count as duplicates.
package enum CBORDecoder {
    /// Decodes exactly one item that spans all of `bytes`.
    ///
    /// - Parameters:
    ///   - bytes: The encoded item.
    ///   - maxDepth: The deepest container nesting accepted; a top-level array or map has depth 1, so 0
    ///     accepts only a scalar.
    /// - Throws: ``CBORDecodingError`` with the offset, from the start of `bytes`, where the problem was found.
    package static func decode(_ bytes: [UInt8], maxDepth: Int = 4) throws(CBORDecodingError) -> CBORValue {
        try self.decode(bytes[...], maxDepth: maxDepth)
    }

    /// Decodes exactly one item that spans all of `bytes`.
    ///
    /// Error offsets count from `bytes.startIndex`, not from the start of the underlying array.
    ///
    /// - Parameters:
    ///   - bytes: The encoded item.
    ///   - maxDepth: The deepest container nesting accepted; a top-level array or map has depth 1, so 0
    ///     accepts only a scalar.
    /// - Throws: ``CBORDecodingError`` with the offset, from the start of `bytes`, where the problem was found.
    package static func decode(_ bytes: ArraySlice<UInt8>, maxDepth: Int = 4) throws(CBORDecodingError) -> CBORValue {
        var parser = Parser(bytes: bytes, maxDepth: maxDepth)
        return try parser.parseItem()
    }

    /// Decodes a map that spans all of `bytes` into its entries in the order they came, without building a
    /// dictionary for it: a CTAP request's parameters, whose few members are each looked up once or twice. Returns
    /// `nil` for a well-formed item that is not a map.
    ///
    /// The checks are those of ``decode(_:maxDepth:)``, duplicate keys included, with the same error codes and
    /// offsets.
    package static func decodeMapEntries(
        _ bytes: ArraySlice<UInt8>,
        maxDepth: Int = 4
    ) throws(CBORDecodingError) -> [(key: CBORValue, value: CBORValue)]? {
        guard maxDepth > 0, let initialByte = bytes.first, initialByte >> 5 == 5 else {
            _ = try self.decode(bytes, maxDepth: maxDepth)
            return nil
        }
        var parser = Parser(bytes: bytes, maxDepth: maxDepth)
        return try parser.parseMapEntries()
    }

    /// Whether `bytes` decodes and is already in CTAP2 canonical form, including map key order.
    package static func isCanonical(_ bytes: [UInt8], maxDepth: Int = 4) -> Bool {
        self.isCanonical(bytes[...], maxDepth: maxDepth)
    }

    /// Whether `bytes` decodes and is already in CTAP2 canonical form, including map key order.
    package static func isCanonical(_ bytes: ArraySlice<UInt8>, maxDepth: Int = 4) -> Bool {
        guard let value = try? self.decode(bytes, maxDepth: maxDepth) else {
            return false
        }
        // The decoder already enforces shortest forms, so only the key order can differ.
        return CBOREncoder.encode(value).elementsEqual(bytes)
    }
}

/// The decoder's state: a cursor into the input and the stack of open containers.
private struct Parser {
    /// What reading one data item's head produced.
    private enum Item {
        case value(CBORValue)
        case arrayHead(count: Int)
        case mapHead(count: Int)
    }

    /// An array or map whose elements are still being read.
    private struct OpenContainer {
        let isMap: Bool
        /// The offset of the container's initial byte.
        let offset: Int
        /// How many items (for a map, keys and values both) are still to come; always at least 1.
        var remainingItems: Int
        var elements: [CBORValue] = []
        var entries: [CBORValue: CBORValue] = [:]
        var pendingKey: CBORValue? = nil
        /// The offset of the pending key, for the error of a duplicate.
        var pendingKeyOffset = 0

        init(isMap: Bool, offset: Int, remainingItems: Int) {
            self.isMap = isMap
            self.offset = offset
            self.remainingItems = remainingItems
            // The count was checked against the input's length, so reserving it allocates no more than the input.
            if isMap {
                self.entries.reserveCapacity(remainingItems / 2)
            } else {
                self.elements.reserveCapacity(remainingItems)
            }
        }

        /// Adds the next item; returns the finished container once its last item is added.
        mutating func add(_ item: CBORValue, at itemOffset: Int) throws(CBORDecodingError) -> CBORValue? {
            if !self.isMap {
                self.elements.append(item)
            } else if let key = self.pendingKey {
                // One hash per entry: a duplicate key shows when its value would replace the first one's.
                guard self.entries.updateValue(item, forKey: key) == nil else {
                    throw CBORDecodingError(code: .duplicateMapKey, offset: self.pendingKeyOffset)
                }
                self.pendingKey = nil
            } else {
                self.pendingKey = item
                self.pendingKeyOffset = itemOffset
            }
            self.remainingItems -= 1
            guard self.remainingItems == 0 else {
                return nil
            }
            return self.isMap ? .map(self.entries) : .array(self.elements)
        }
    }

    private let bytes: ArraySlice<UInt8>
    private let maxDepth: Int
    private var index: Int
    private var openContainers: [OpenContainer] = []

    init(bytes: ArraySlice<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        self.index = bytes.startIndex
        // One allocation for the stack instead of growing it as containers open.
        self.openContainers.reserveCapacity(min(maxDepth, 8))
    }

    /// The cursor's offset from the start of the input.
    private var offset: Int {
        self.index - self.bytes.startIndex
    }

    /// How many input bytes are left after the cursor.
    private var remainingBytes: Int {
        self.bytes.endIndex - self.index
    }

    /// Reads one complete item, which must end exactly at the end of the input.
    mutating func parseItem() throws(CBORDecodingError) -> CBORValue {
        let value = try self.parseNextItem()
        guard self.remainingBytes == 0 else {
            throw CBORDecodingError(code: .trailingBytes, offset: self.offset)
        }
        return value
    }

    /// Reads a map's head and then its entries one item at a time (the map itself counts as an open container for
    /// the depth limit); the map must end exactly at the end of the input.
    mutating func parseMapEntries() throws(CBORDecodingError) -> [(key: CBORValue, value: CBORValue)] {
        let mapOffset = self.offset
        guard case .mapHead(let count) = try self.readHead() else {
            throw CBORDecodingError(code: .truncated, offset: mapOffset)  // not reached: the caller saw a map head
        }
        // Stands for the map while its entries are read, so that nested containers count it.
        self.openContainers.append(OpenContainer(isMap: false, offset: mapOffset, remainingItems: 0))
        let base = self.openContainers.count
        var entries: [(key: CBORValue, value: CBORValue)] = []
        entries.reserveCapacity(count)
        // A few keys are compared one by one; past that, a set keeps a hostile request's thousands of keys linear.
        var keys: Set<CBORValue>? = count > 16 ? [] : nil
        for _ in 0..<count {
            let keyOffset = self.offset
            let key = try self.parseNextItem(above: base)
            let value = try self.parseNextItem(above: base)
            // After the value, as decode(_:) finds it, and by the same equality (text by canonical equivalence).
            let duplicate = keys?.insert(key).inserted == false || (keys == nil && entries.contains { $0.key == key })
            if duplicate {
                throw CBORDecodingError(code: .duplicateMapKey, offset: keyOffset)
            }
            entries.append((key: key, value: value))
        }
        guard self.remainingBytes == 0 else {
            throw CBORDecodingError(code: .trailingBytes, offset: self.offset)
        }
        return entries
    }

    /// Reads one complete item from the cursor, leaving the containers below `base` on the stack alone.
    private mutating func parseNextItem(above base: Int = 0) throws(CBORDecodingError) -> CBORValue {
        while true {
            var itemOffset = self.offset
            var value: CBORValue
            switch try self.readHead() {
            case .value(let scalar):
                value = scalar
            case .arrayHead(count: 0):
                value = .array([])
            case .mapHead(count: 0):
                value = .map([:])
            case .arrayHead(let count):
                self.openContainers.append(OpenContainer(isMap: false, offset: itemOffset, remainingItems: count))
                continue
            case .mapHead(let count):
                self.openContainers.append(OpenContainer(isMap: true, offset: itemOffset, remainingItems: 2 * count))
                continue
            }

            // `value` is complete: hand it to the innermost open container, closing each one it completes.
            while self.openContainers.count > base, let top = self.openContainers.indices.last {
                guard let finished = try self.openContainers[top].add(value, at: itemOffset) else {
                    break
                }
                itemOffset = self.openContainers[top].offset
                value = finished
                self.openContainers.removeLast()
            }
            if self.openContainers.count == base {
                return value
            }
        }
    }

    /// Reads one item's head, and a string's payload; checks containers against the depth limit and the input.
    private mutating func readHead() throws(CBORDecodingError) -> Item {
        let itemOffset = self.offset
        guard let initialByte = self.readByte() else {
            throw CBORDecodingError(code: .truncated, offset: itemOffset)
        }
        let majorType = initialByte >> 5
        let additionalInfo = initialByte & 0x1f

        switch additionalInfo {
        case 28...30:
            throw CBORDecodingError(code: .reservedAdditionalInfo, offset: itemOffset)
        case 31:
            throw CBORDecodingError(code: majorType == 7 ? .unexpectedBreak : .indefiniteLength, offset: itemOffset)
        default:
            break
        }
        switch majorType {
        case 6:
            throw CBORDecodingError(code: .unsupportedTag, offset: itemOffset)
        case 7:
            return .value(try self.readSimpleValue(additionalInfo: additionalInfo, itemOffset: itemOffset))
        default:
            break
        }

        let argument = try self.readArgument(additionalInfo: additionalInfo, itemOffset: itemOffset)
        switch majorType {
        case 0:
            return .value(.unsigned(argument))
        case 1:
            return .value(.negative(argument))
        case 2:
            return .value(.byteString(Array(try self.readPayload(length: argument, itemOffset: itemOffset))))
        case 3:
            let payload = try self.readPayload(length: argument, itemOffset: itemOffset)
            // ASCII (map keys, rpIds, types) needs no validation; the generic validating initializer looks up type
            // metadata on each call, which showed in getAssertion's profile.
            if !payload.contains(where: { $0 >= 0x80 }) {
                return .value(.textString(String(decoding: payload, as: UTF8.self)))
            }
            guard let text = String(validating: payload, as: UTF8.self) else {
                throw CBORDecodingError(code: .invalidUTF8, offset: itemOffset)
            }
            return .value(.textString(text))
        case 4:
            return .arrayHead(count: try self.checkContainer(count: argument, itemsPerEntry: 1, itemOffset: itemOffset))
        default:
            return .mapHead(count: try self.checkContainer(count: argument, itemsPerEntry: 2, itemOffset: itemOffset))
        }
    }

    /// Reads the rest of a major type 7 item: one of the four supported simple values, or an error.
    private mutating func readSimpleValue(
        additionalInfo: UInt8,
        itemOffset: Int
    ) throws(CBORDecodingError) -> CBORValue {
        switch additionalInfo {
        case 20:
            return .boolean(false)
        case 21:
            return .boolean(true)
        case 22:
            return .null
        case 23:
            return .undefined
        case 24:
            guard let simpleValue = self.readByte() else {
                throw CBORDecodingError(code: .truncated, offset: itemOffset)
            }
            // Simple values below 32 have a one-byte form; their two-byte form is not well-formed.
            throw CBORDecodingError(
                code: simpleValue < 32 ? .nonMinimalEncoding : .unsupportedSimpleValue,
                offset: itemOffset
            )
        case 25, 26, 27:
            throw CBORDecodingError(code: .unsupportedFloat, offset: itemOffset)
        default:
            throw CBORDecodingError(code: .unsupportedSimpleValue, offset: itemOffset)
        }
    }

    /// Reads a head's argument for additional information 0...27 and checks that it is in its shortest form.
    private mutating func readArgument(
        additionalInfo: UInt8,
        itemOffset: Int
    ) throws(CBORDecodingError) -> UInt64 {
        let byteCount: Int
        let smallestForWidth: UInt64
        switch additionalInfo {
        case 0..<24:
            return UInt64(additionalInfo)
        case 24:
            (byteCount, smallestForWidth) = (1, 24)
        case 25:
            (byteCount, smallestForWidth) = (2, 0x100)
        case 26:
            (byteCount, smallestForWidth) = (4, 0x1_0000)
        case 27:
            (byteCount, smallestForWidth) = (8, 0x1_0000_0000)
        default:
            throw CBORDecodingError(code: .reservedAdditionalInfo, offset: itemOffset)
        }
        guard byteCount <= self.remainingBytes else {
            throw CBORDecodingError(code: .truncated, offset: itemOffset)
        }
        var argument: UInt64 = 0
        for _ in 0..<byteCount {
            argument = (argument << 8) | UInt64(self.bytes[self.index])
            self.index += 1
        }
        guard argument >= smallestForWidth else {
            throw CBORDecodingError(code: .nonMinimalEncoding, offset: itemOffset)
        }
        return argument
    }

    /// Reads a string's payload of `length` bytes, checking the length against the input first.
    private mutating func readPayload(
        length: UInt64,
        itemOffset: Int
    ) throws(CBORDecodingError) -> ArraySlice<UInt8> {
        guard length <= UInt64(self.remainingBytes), let payload = self.readBytes(count: Int(length)) else {
            throw CBORDecodingError(code: .truncated, offset: itemOffset)
        }
        return payload
    }

    /// Checks an array or map head against the depth limit and the input; returns its entry count.
    ///
    /// Every item takes at least one byte, so a container whose items cannot fit in the remaining input is
    /// truncated, and is rejected before any of its elements are read.
    private func checkContainer(
        count: UInt64,
        itemsPerEntry: Int,
        itemOffset: Int
    ) throws(CBORDecodingError) -> Int {
        guard self.openContainers.count < self.maxDepth else {
            throw CBORDecodingError(code: .depthExceeded, offset: itemOffset)
        }
        guard count <= UInt64(self.remainingBytes / itemsPerEntry) else {
            throw CBORDecodingError(code: .truncated, offset: itemOffset)
        }
        return Int(count)
    }

    /// Reads one byte and advances the cursor, or returns `nil` at the end of the input.
    ///
    /// Heads and arguments are read a byte at a time by index: a one-byte slice would retain and release the
    /// input's storage for each.
    private mutating func readByte() -> UInt8? {
        guard self.index < self.bytes.endIndex else {
            return nil
        }
        defer { self.index += 1 }
        return self.bytes[self.index]
    }

    /// Reads `count` bytes and advances the cursor, or returns `nil` without moving if fewer remain.
    private mutating func readBytes(count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, count <= self.remainingBytes else {
            return nil
        }
        let start = self.index
        self.index += count
        return self.bytes[start..<self.index]
    }
}

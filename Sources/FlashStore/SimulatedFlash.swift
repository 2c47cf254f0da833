/// A NOR flash in memory with strict rules, wear tracking and power-cut injection.
///
/// Erase sets a page to 0xFF. A program may only clear bits, must be word-aligned and inside one page, and
/// a word may be programmed at most `maxProgramsPerWord` times between erases (plus, when the geometry
/// allows it, any number of all-zero programs). Breaking a rule is a programmer error: it traps, or with
/// ``ViolationPolicy/record`` is refused and recorded.
///
/// A page erased `eraseEndurance` times is worn out: a further erase throws ``FlashError/Code/wornOut`` and
/// leaves the page as it is; programs and reads keep working.
///
/// Power cuts: ``armPowerCut(atMutation:tear:)`` makes the k-th next mutation (program or erase) the
/// interrupted one; it is applied according to its ``TearMode`` and throws ``FlashError/Code/powerCut``,
/// and so does every operation after it (reads included) until ``repower()``. Only completed operations
/// (including ``TearMode/complete``) count towards program and erase limits: an interrupted operation
/// does not, as if its effect were fractional.
package struct SimulatedFlash: FlashDevice, Equatable, Sendable {
    package let geometry: FlashGeometry
    /// What to do on a NOR-rule breach.
    package var policy: ViolationPolicy
    private(set) var bytes: [UInt8]
    /// Programs of each word since its page's erase, one array per page; an empty array is a page whose words
    /// are all at zero (most pages of a loaded image stay so, and cost no memory).
    private var programCounts: [[UInt8]]
    private var eraseCounts: [Int]
    /// Breaches refused under ``ViolationPolicy/record``.
    package private(set) var violations: [FlashViolation] = []
    /// Programs and erases attempted so far (worn-out erases and calls while powered off excluded).
    package private(set) var mutationCount = 0
    /// Whether the device is off after a cut.
    package private(set) var isPoweredOff = false
    private var armedCut: (remaining: Int, tear: TearMode)?

    /// A blank device: every byte 0xFF, nothing programmed, no erase counted.
    package init(geometry: FlashGeometry, policy: ViolationPolicy = .trap) {
        precondition(geometry.validationError == nil, "invalid flash geometry: \(geometry.validationError ?? "")")
        self.geometry = geometry
        self.policy = policy
        bytes = Array(repeating: 0xFF, count: geometry.totalSize)
        programCounts = Array(repeating: [], count: geometry.pageCount)
        eraseCounts = Array(repeating: 0, count: geometry.pageCount)
    }

    /// A device holding `image` (for example loaded from a file or made of random bytes). Program counts
    /// start at zero: the history of the words is unknown.
    package init(geometry: FlashGeometry, image: [UInt8], eraseCounts: [Int]? = nil, policy: ViolationPolicy = .trap) {
        self.init(geometry: geometry, policy: policy)
        precondition(image.count == geometry.totalSize, "image size \(image.count) != \(geometry.totalSize)")
        bytes = image
        if let eraseCounts {
            precondition(eraseCounts.count == geometry.pageCount, "one erase count per page")
            self.eraseCounts = eraseCounts
        }
    }

    /// The whole contents, as the chip would be dumped.
    package var image: [UInt8] { bytes }

    /// Erase counts of all pages, in page order.
    package var allEraseCounts: [Int] { eraseCounts }

    package func eraseCount(page: Int) -> Int { eraseCounts[page] }

    /// How many times the word containing `offset` has been programmed since its page was erased.
    package func programCount(offset: Int) -> Int {
        let counts = programCounts[offset / geometry.pageSize]
        return counts.isEmpty ? 0 : Int(counts[offset % geometry.pageSize / geometry.wordSize])
    }

    package func read(offset: Int, count: Int) throws(FlashError) -> [UInt8] {
        if isPoweredOff { throw .powerCut }
        precondition(offset >= 0 && count >= 0 && offset + count <= bytes.count, "read outside the flash")
        return Array(bytes[offset..<offset + count])
    }

    // MARK: Validation

    /// The rule `program(offset:bytes:)` would break, or `nil` when the program is legal.
    package func validateProgram(offset: Int, bytes data: [UInt8]) -> FlashViolation? {
        let w = geometry.wordSize
        func violation(_ kind: FlashViolation.Kind, _ at: Int) -> FlashViolation {
            FlashViolation(kind: kind, operation: "program \(data.count) bytes at \(offset)", offset: at)
        }
        guard offset >= 0, offset + data.count <= bytes.count else { return violation(.outOfRange, offset) }
        guard offset % w == 0, data.count % w == 0 else { return violation(.misaligned, offset) }
        guard data.isEmpty || offset / geometry.pageSize == (offset + data.count - 1) / geometry.pageSize else {
            return violation(.crossesPage, offset)
        }
        var word = 0
        while word < data.count {
            var allZero = true
            for i in word..<word + w {
                let old = bytes[offset + i]
                let new = data[i]
                if new & ~old != 0 { return violation(.setsBit, offset + i) }
                if new != 0 { allZero = false }
            }
            let zeroExempt = allZero && geometry.allowsZeroOverwrite
            if !zeroExempt && programCount(offset: offset + word) >= geometry.maxProgramsPerWord {
                return violation(.tooManyPrograms, offset + word)
            }
            word += w
        }
        return nil
    }

    /// The rule `erase(page:)` would break, or `nil` when the erase is legal.
    package func validateErase(page: Int) -> FlashViolation? {
        guard page >= 0, page < geometry.pageCount else {
            return FlashViolation(kind: .outOfRange, operation: "erase page \(page)", offset: page * geometry.pageSize)
        }
        return nil
    }

    private mutating func breach(_ violation: FlashViolation) {
        switch policy {
        case .trap: preconditionFailure(violation.description)
        case .record: violations.append(violation)
        }
    }

    // MARK: Mutations

    /// Arms a power cut at the `k`-th next mutation (1 is the very next program or erase).
    /// Sets bytes to what another copy of the flash holds (a file that refused a write), outside the NOR rules:
    /// the flash is then as a power cut during that write would have left it.
    package mutating func restore(offset: Int, bytes data: [UInt8]) {
        guard offset >= 0, offset + data.count <= bytes.count else { return }
        bytes.replaceSubrange(offset..<offset + data.count, with: data)
    }

    package mutating func armPowerCut(atMutation k: Int, tear: TearMode) {
        precondition(k >= 1, "the cut must be at a future mutation")
        armedCut = (k, tear)
    }

    /// Cancels an armed power cut.
    package mutating func disarmPowerCut() { armedCut = nil }

    /// Whether a cut is armed and has not fired yet.
    package var isCutArmed: Bool { armedCut != nil }

    package mutating func repower() {
        isPoweredOff = false
        armedCut = nil
    }

    /// Cuts the power now, between two operations.
    package mutating func cutPower() {
        isPoweredOff = true
        armedCut = nil
    }

    /// Decrements the armed countdown; returns the tear mode when this mutation is the cut one.
    private mutating func tearForThisMutation() -> TearMode? {
        mutationCount += 1
        guard let cut = armedCut else { return nil }
        if cut.remaining <= 1 {
            armedCut = nil
            isPoweredOff = true
            return cut.tear
        }
        armedCut = (cut.remaining - 1, cut.tear)
        return nil
    }

    package mutating func program(offset: Int, bytes data: [UInt8]) throws(FlashError) {
        if isPoweredOff { throw .powerCut }
        if let violation = validateProgram(offset: offset, bytes: data) {
            breach(violation)
            _ = tearForThisMutation()
            if isPoweredOff { throw .powerCut }
            return
        }
        let w = geometry.wordSize
        switch tearForThisMutation() {
        case nil, .some(.complete):
            for i in 0..<data.count { bytes[offset + i] &= data[i] }
            let page = offset / geometry.pageSize
            if programCounts[page].isEmpty { programCounts[page] = Array(repeating: 0, count: geometry.wordsPerPage) }
            var word = offset % geometry.pageSize / w
            while word < (offset % geometry.pageSize + data.count) / w {
                if programCounts[page][word] < 255 { programCounts[page][word] += 1 }
                word += 1
            }
        case .some(TearMode.none):
            break
        case .some(.randomBits(let seed)):
            var rng = SplitMix64(seed: seed ^ (UInt64(offset) &* 0x9E37_79B9_7F4A_7C15))
            var mask: UInt64 = 0
            for i in 0..<data.count {
                if i % 8 == 0 { mask = rng.next() }
                let toClear = bytes[offset + i] & ~data[i]
                bytes[offset + i] &= ~(toClear & UInt8(truncatingIfNeeded: mask >> (8 * UInt64(i % 8))))
            }
        case .some(.prefix):
            let applied = (data.count / w) / 2 * w
            for i in 0..<applied { bytes[offset + i] &= data[i] }
        }
        if isPoweredOff { throw .powerCut }
    }

    package mutating func erase(page: Int) throws(FlashError) {
        if isPoweredOff { throw .powerCut }
        if let violation = validateErase(page: page) {
            breach(violation)
            _ = tearForThisMutation()
            if isPoweredOff { throw .powerCut }
            return
        }
        if eraseCounts[page] >= geometry.eraseEndurance {
            throw FlashError(.wornOut, page: page, detail: "erased \(eraseCounts[page]) times already")
        }
        let start = page * geometry.pageSize
        let w = geometry.wordSize
        switch tearForThisMutation() {
        case nil, .some(.complete):
            for i in start..<start + geometry.pageSize { bytes[i] = 0xFF }
            programCounts[page] = []
            eraseCounts[page] += 1
        case .some(TearMode.none):
            break
        case .some(.randomBits(let seed)):
            var rng = SplitMix64(seed: seed ^ (UInt64(page) &* 0xD1B5_4A32_D192_ED03))
            var mask: UInt64 = 0
            for i in 0..<geometry.pageSize {
                if i % 8 == 0 { mask = rng.next() }
                bytes[start + i] |= UInt8(truncatingIfNeeded: mask >> (8 * UInt64(i % 8)))
            }
        case .some(.prefix):
            for i in start..<start + (geometry.wordsPerPage / 2) * w { bytes[i] = 0xFF }
        }
        if isPoweredOff { throw .powerCut }
    }

    package static func == (a: SimulatedFlash, b: SimulatedFlash) -> Bool {
        a.geometry == b.geometry && a.bytes == b.bytes && a.eraseCounts == b.eraseCounts
            && zip(a.programCounts, b.programCounts).allSatisfy { x, y in
                // An empty array stands for a page of zero counts.
                x == y || (x.isEmpty && !y.contains { $0 != 0 }) || (y.isEmpty && !x.contains { $0 != 0 })
            }
            && a.isPoweredOff == b.isPoweredOff
    }
}

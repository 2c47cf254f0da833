extension FlashKVStore {
    /// Performs a plan on the flash, keeping the index in step. Any device error makes the store stale.
    mutating func execute(_ planner: Planner, transaction: Transaction) throws(StoreError) {
        do {
            for step in planner.steps { try perform(step, transaction: transaction) }
        } catch {
            isStale = true
            throw error
        }
        pages = planner.pages
        tail = planner.tail
        nextSequence = planner.nextSequence
        headSequence = planner.headSequence
    }

    private mutating func perform(_ step: Step, transaction: Transaction) throws(StoreError) {
        let pageSize = format.pageSize
        switch step {
        case .open(let page, let sequence):
            try program(page * pageSize + 8, StoreFormat.slotB(sequence: sequence))

        case .copy(let page, let offset, let entries, let head):
            // A copy heals a value one flipped bit had damaged; one that fails its check otherwise is copied as it
            // is, with its check, and stays refused.
            var updates: [StoreFormat.EncodedUpdate] = []
            for e in entries {
                let stored = try read(e.location.offset, e.location.length)
                switch StoreFormat.checkedValue(stored, check: e.location.check) {
                case .intact(let value): updates.append((e.key, value, e.location.check ?? CRC32.checksum(value)))
                // The flipped bit may be in the stored check itself: the copy gets the value's own.
                case .corrected(let value): updates.append((e.key, value, CRC32.checksum(value)))
                case .damaged: updates.append((e.key, stored, e.location.check))
                }
            }
            let at = page * pageSize + offset
            try writeRecord(at: at, format.encodeRecord(clear: false, head: head, updates: updates))
            var valueAt = at + format.descriptorAreaSize(count: entries.count, head: head != nil)
            for u in updates {
                let length = u.value!.count
                index[u.key] = Location(page: page, offset: valueAt, length: length, check: u.check)
                valueAt += format.roundUp(length)
            }

        case .erase(let page, let eraseCount):
            do {
                try device.erase(page: page)
            } catch {
                throw error.code == .wornOut ? StoreError(.wornOut, error.description) : StoreError(flash: error)
            }
            try program(page * pageSize, StoreFormat.slotA(eraseCount: eraseCount))

        case .transaction(let page, let offset):
            var updates: [StoreFormat.EncodedUpdate] = []
            for u in transaction.updates {
                switch u {
                case .insert(let key, let value): updates.append((key, value, CRC32.checksum(value)))
                case .remove(let key): updates.append((key, nil, nil))
                }
            }
            let at = page * pageSize + offset
            try writeRecord(at: at, format.encodeRecord(clear: transaction.clear, head: nil, updates: updates))
            // Committed: update the index, then wipe what the transaction made dead.
            var dead: [Location] = []
            if transaction.clear {
                dead.append(contentsOf: index.values)
                index.removeAll()
                usedBytes = 0
            }
            let inserts = updates.count { $0.value != nil }
            var valueAt = at + format.descriptorAreaSize(count: inserts, removes: updates.count - inserts, head: false)
            for u in updates {
                if let old = index[u.key] {
                    dead.append(old)
                    usedBytes -= format.footprint(old.length)
                }
                if let value = u.value {
                    index[u.key] = Location(page: page, offset: valueAt, length: value.count, check: u.check)
                    usedBytes += format.footprint(value.count)
                    valueAt += format.roundUp(value.count)
                } else {
                    index[u.key] = nil
                }
            }
            for location in dead { _ = try wipe(location.offset, format.roundUp(location.length)) }
        }
    }

    /// Programs a record body, then its commit word (the atomic point of the record).
    private mutating func writeRecord(at offset: Int, _ body: [UInt8]) throws(StoreError) {
        try program(offset, body)
        try program(offset + body.count, Array(repeating: 0, count: format.wordSize))
    }

    mutating func program(_ offset: Int, _ bytes: [UInt8]) throws(StoreError) {
        do {
            try device.program(offset: offset, bytes: bytes)
        } catch {
            throw StoreError(flash: error)
        }
    }

    func read(_ offset: Int, _ count: Int) throws(StoreError) -> [UInt8] {
        do {
            return try device.read(offset: offset, count: count)
        } catch {
            throw StoreError(flash: error)
        }
    }

    /// Zeroes the words of `offset..<offset+count` that are not zero yet (one program over the smallest
    /// covering run). With `keepErased`, all-ones words are left alone too. Returns whether it programmed.
    mutating func wipe(_ offset: Int, _ count: Int, keepErased: Bool = false) throws(StoreError) -> Bool {
        guard count > 0 else { return false }
        let bytes = try read(offset, count)
        guard let run = format.dirtyWords(bytes, 0..<count, keepErased: keepErased) else { return false }
        try program(offset + run.lowerBound, Array(repeating: 0, count: run.count))
        return true
    }
}

import FlashStore
import FlashStoreTesting
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Release-mode runs for benchmarks and CI nightly jobs: `FLASH_LONG_PROOF=1 swift test -c release --filter LongProof`.
@Suite("Long power-cut proofs", .enabled(if: getenv("FLASH_LONG_PROOF") != nil), .serialized)
struct LongProofTests {
    func seconds(_ body: () -> Void) -> Double {
        var start = timespec()
        var end = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        body()
        clock_gettime(CLOCK_MONOTONIC, &end)
        return Double(end.tv_sec - start.tv_sec) + Double(end.tv_nsec - start.tv_nsec) / 1e9
    }

    @Test func exhaustiveNRF52840() {
        var report: ProofReport?
        let time = seconds {
            report = PowerCutProof.exhaustive(
                geometry: .nrf52840,
                workload: .credentials,
                operations: 100_000,
                limit: 12_000
            )
        }
        print("\(report!)\n  time: \(time) s")
        #expect(report!.passed)
        #expect(report!.cutPoints >= 10_000)
    }

    @Test func exhaustiveSTM32L4() {
        var report: ProofReport?
        let time = seconds {
            report = PowerCutProof.exhaustive(
                geometry: .stm32l4(pages: 8),
                workload: .credentials,
                operations: 100_000,
                seed: 2,
                limit: 6_000
            )
        }
        print("\(report!)\n  time: \(time) s")
        #expect(report!.passed)
    }

    @Test func randomNRF52840() {
        var report: ProofReport?
        let time = seconds {
            report = PowerCutProof.random(geometry: .nrf52840, seeds: Array(0..<3_500), operationsPerSeed: 60)
        }
        print("\(report!)\n  time: \(time) s")
        #expect(report!.passed)
        #expect(report!.scenarios >= 100_000)
    }

    @Test func randomSTM32L4() {
        var report: ProofReport?
        let time = seconds {
            report = PowerCutProof.random(geometry: .stm32l4, seeds: Array(0..<1_000), operationsPerSeed: 60)
        }
        print("\(report!)\n  time: \(time) s")
        #expect(report!.passed)
    }

    @Test func counterLifetimeNRF52840() throws {
        var store = try FlashKVStore(mounting: SimulatedFlash(geometry: .nrf52840))
        for i in 0..<150 { try store.insert(secret(UInt64(i), length: 260), for: UInt16(i)) }
        var updates = 0
        let time = seconds {
            do {
                while updates < 2_000_000 {
                    try store.insert(UInt32(truncatingIfNeeded: updates).bytes, for: 0xFFF0)
                    updates += 1
                }
            } catch {
                print("stopped after \(updates) updates: \(error)")
            }
        }
        let counts = (0..<20).map { store.device.eraseCount(page: $0) }
        print("2M counter updates with 150 credentials: erase counts \(counts.min()!)...\(counts.max()!), \(time) s")
        #expect(updates == 2_000_000)
    }
}

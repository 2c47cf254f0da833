import CTAPCoreTesting
import FlashStore
import Testing

/// A bounded run of the CTAP-level power-cut proof (`make flash-proof` runs the long one).
@Suite struct CTAPPowerCutProofTests {
    /// 8 pages of 1 KiB: room for about 20 credentials, so the store fills, compacts and refuses quickly.
    let small = FlashGeometry(wordSize: 4, pageSize: 1024, pageCount: 8, maxProgramsPerWord: 2, eraseEndurance: 100_000)

    @Test func everyCutOfACTAPWorkloadRecoversToBeforeOrAfter() {
        let report = CTAPPowerCutProof.run(
            geometry: small, operations: 400, seed: 3, cutLimit: 600, scanEvery: 5)
        #expect(report.violations.isEmpty, "\(report.violations.prefix(5))")
        #expect(report.cutPoints >= 300)
        #expect(report.scenarios == report.cutPoints * 4)
        #expect(report.imageScans > 50)
        #expect(report.storeFullRefusals > 0)  // the workload filled the store
        #expect(report.assertions > 50)
    }

    @Test func everyCutOfALargeBlobWriteLeavesTheOldArrayOrTheNew() {
        let report = CTAPPowerCutProof.run(
            geometry: .nrf52840, operations: 120, seed: 11, cutLimit: 2500, scanEvery: 0)
        #expect(report.violations.isEmpty, "\(report.violations.prefix(5))")
        #expect(report.largeBlobWrites >= 5)
        #expect(report.cutPoints >= 500)
    }
}

import Testing

@testable import CTAPHID

@Suite struct CapabilityTests {
    @Test func aKeyWithoutCBORRefusesCBORMessages() {
        var machine = CTAPHIDMachine(
            configuration: CTAPHIDConfiguration(capabilities: CTAPHIDConfiguration.capabilityWink),
            channelSeed: 1
        )
        let channel = machine.allocateChannel()
        #expect(
            machine.receive(report: initPacket(channel, .cbor, [0x04]), now: .zero) == [
                errorReport(channel, .invalidCommand)
            ]
        )
        let apdu: [UInt8] = [0, 3, 0, 0, 0]
        #expect(
            machine.receive(report: initPacket(channel, .msg, apdu), now: .zero) == [
                .deliver(channel: channel, command: .msg, payload: apdu)
            ]
        )
    }

    @Test func aKeyWithNMSGRefusesU2FMessages() {
        var machine = CTAPHIDMachine(
            configuration: CTAPHIDConfiguration(
                capabilities: CTAPHIDConfiguration.capabilityCBOR | CTAPHIDConfiguration.capabilityNMSG
            ),
            channelSeed: 1
        )
        let channel = machine.allocateChannel()
        #expect(
            machine.receive(report: initPacket(channel, .msg, [0, 3, 0, 0, 0]), now: .zero) == [
                errorReport(channel, .invalidCommand)
            ]
        )
        machine.startRequest(on: channel, now: .zero)
    }
}

import Testing

@testable import ControlProtocol

@Suite struct ControlArgumentsTests {
    @Test func aliasesNameTheProtocolsCommands() {
        #expect(ControlArguments.command("power-cycle") == "powerCycle")
        #expect(ControlArguments.command("events") == "subscribe")
        #expect(ControlArguments.command("status") == "status")
    }

    @Test func valuesAreTyped() throws {
        let params = try ControlArguments.parameters(
            command: "injectFault",
            json: nil,
            arguments: ["status", "command=makeCredential", "status=0x28", "count=2", "once=true", "x=null"]
        )
        #expect(
            params == [
                "kind": "status", "command": "makeCredential", "status": 0x28, "count": 2, "once": true, "x": nil,
            ]
        )
    }

    @Test func argumentsAddToTheJSONObject() throws {
        let params = try ControlArguments.parameters(
            command: "presence",
            json: #"{"mode": "deny", "delayMs": 5}"#,
            arguments: ["delayMs=0"]
        )
        #expect(params == ["mode": "deny", "delayMs": 0])
    }

    @Test func aBareValueNeedsAMainParameter() {
        #expect(throws: ControlError.self) {
            try ControlArguments.parameters(command: "status", json: nil, arguments: ["loud"])
        }
        #expect(throws: ControlError.self) {
            try ControlArguments.parameters(command: "status", json: "[1]", arguments: [])
        }
    }
}

import Testing

@testable import ControlProtocol

func parse(_ text: String) -> Result<ControlRequest, ControlFailure> { ControlRequest.parse(Array(text.utf8)) }

func failure(_ text: String) -> ControlFailure? {
    if case .failure(let f) = parse(text) { return f }
    return nil
}

func command(_ text: String) -> ControlCommand? {
    if case .success(let r) = parse(text) { return r.command }
    return nil
}

@Suite struct ControlRequestTests {
    @Test(arguments: [
        ("{\"id\":1,\"command\":\"status\"}", ControlCommand.status),
        ("{\"id\":\"a\",\"command\":\"getCredentials\",\"params\":{}}", .getCredentials),
        ("{\"id\":1,\"command\":\"powerCycle\",\"params\":null}", .powerCycle(offMilliseconds: nil)),
        ("{\"id\":1,\"command\":\"powerCycle\",\"params\":{\"offMs\":1500}}", .powerCycle(offMilliseconds: 1500)),
        ("{\"id\":1,\"command\":\"touch\"}", .touch),
        ("{\"id\":1,\"command\":\"removeAllCredentials\"}", .removeAllCredentials),
        (
            "{\"id\":1,\"command\":\"removeCredential\",\"params\":{\"credentialId\":\"AQID\"}}",
            .removeCredential(id: [1, 2, 3])
        ),
        ("{\"id\":1,\"command\":\"setUserVerified\",\"params\":{\"isUserVerified\":false}}", .setUserVerified(false)),
        (
            "{\"id\":1,\"command\":\"setAutomaticPresenceSimulation\",\"params\":{\"enabled\":true}}",
            .setAutomaticPresenceSimulation(true)
        ),
        (
            "{\"id\":1,\"command\":\"presence\",\"params\":{\"mode\":\"deny\",\"delayMs\":0}}",
            .presence(.deny(delayMilliseconds: 0))
        ),
        (
            "{\"id\":1,\"command\":\"presence\",\"params\":{\"mode\":\"approve\"}}",
            .presence(.approve(delayMilliseconds: 200))
        ),
        ("{\"id\":1,\"command\":\"presence\",\"params\":{\"mode\":\"prompt\"}}", .presence(.prompt)),
        (
            "{\"id\":1,\"command\":\"presence\",\"params\":{\"mode\":\"approveNext\",\"delayMs\":5}}",
            .presence(.approveNext(delayMilliseconds: 5))
        ),
        (
            "{\"id\":1,\"command\":\"setOption\",\"params\":{\"alwaysUv\":true}}",
            .setOption(OptionChanges(alwaysUv: true))
        ),
        (
            "{\"id\":1,\"command\":\"injectFault\",\"params\":{\"kind\":\"status\",\"command\":\"getAssertion\",\"status\":46}}",
            .injectFault(.status(target: .getAssertion, status: 0x2E, count: 1))
        ),
        (
            "{\"id\":1,\"command\":\"injectFault\",\"params\":{\"kind\":\"status\",\"command\":\"u2f\",\"status\":27013,\"count\":3}}",
            .injectFault(.status(target: .u2f, status: 0x6985, count: 3))
        ),
        (
            "{\"id\":1,\"command\":\"injectFault\",\"params\":{\"kind\":\"keyStoreFull\",\"afterCredentials\":2}}",
            .injectFault(.keyStoreFull(afterCredentials: 2))
        ),
        (
            "{\"id\":1,\"command\":\"injectFault\",\"params\":{\"kind\":\"flashWriteFailure\"}}",
            .injectFault(.flashWriteFailure(count: 1))
        ),
        (
            "{\"id\":1,\"command\":\"injectFault\",\"params\":{\"kind\":\"dropReports\",\"direction\":\"out\",\"count\":4}}",
            .injectFault(.dropReports(inbound: false, count: 4))
        ),
        ("{\"id\":1,\"command\":\"clearFaults\"}", .clearFaults),
        ("{\"id\":1,\"command\":\"subscribe\"}", .subscribe),
        ("{\"id\":1,\"command\":\"unsubscribe\"}", .unsubscribe),
        (
            "{\"id\":1,\"command\":\"trace\",\"params\":{\"path\":\"/tmp/t.pcapng\"}}",
            .trace(path: "/tmp/t.pcapng", format: nil)
        ),
        (
            "{\"id\":1,\"command\":\"trace\",\"params\":{\"path\":\"/tmp/t\",\"format\":\"jsonl\"}}",
            .trace(path: "/tmp/t", format: "jsonl")
        ),
        ("{\"id\":1,\"command\":\"trace\"}", .trace(path: nil, format: nil)),
        (
            "{\"id\":1,\"command\":\"setAttestation\",\"params\":{\"privateKey\":\"AQ\",\"certificate\":\"Ag\",\"rootCertificate\":\"Aw\"}}",
            .setAttestation(privateKey: [1], certificate: [2], rootCertificate: [3], enterprise: nil)
        ),
        (
            "{\"id\":1,\"command\":\"setAttestation\",\"params\":{\"privateKey\":\"AQ\",\"certificate\":\"Ag\",\"rootCertificate\":\"Aw\",\"enterprisePrivateKey\":\"BA\",\"enterpriseCertificate\":\"BQ\"}}",
            .setAttestation(
                privateKey: [1],
                certificate: [2],
                rootCertificate: [3],
                enterprise: .init(privateKey: [4], certificate: [5])
            )
        ),
    ])
    func parsesEveryCommand(text: String, expected: ControlCommand) {
        #expect(command(text) == expected)
    }

    @Test func parsesAddCredential() {
        let text = """
            {"id":9,"command":"addCredential","params":{"credentialId":"AAEC","isResidentCredential":true,\
            "rpId":"example.com","privateKey":"MC4CAQA","userHandle":"dQ","signCount":5,"userName":"u",\
            "userDisplayName":null}}
            """
        #expect(
            command(text)
                == .addCredential(
                    CredentialParameters(
                        credentialId: [0, 1, 2],
                        isResidentCredential: true,
                        rpId: "example.com",
                        privateKey: [0x30, 0x2E, 0x02, 0x01, 0x00],
                        userHandle: [0x75],
                        signCount: 5,
                        userName: "u"
                    )
                )
        )
    }

    @Test(arguments: [
        ("not json", ControlError.Code.parseError, false),
        ("{\"id\":1,\"command\":\"status\"} trailing", .parseError, false),
        ("[\"status\"]", .invalidRequest, false),
        ("{\"command\":\"status\"}", .invalidRequest, false),
        ("{\"id\":1.5,\"command\":\"status\"}", .invalidRequest, false),
        ("{\"id\":null,\"command\":\"status\"}", .invalidRequest, false),
        ("{\"id\":{},\"command\":\"status\"}", .invalidRequest, false),
        ("{\"id\":1}", .invalidRequest, true),
        ("{\"id\":1,\"command\":7}", .invalidRequest, true),
        ("{\"id\":1,\"command\":\"status\",\"params\":[]}", .invalidRequest, true),
        ("{\"id\":1,\"command\":\"status\",\"extra\":1}", .invalidRequest, true),
        ("{\"id\":1,\"command\":\"reboot\"}", .unknownCommand, true),
        ("{\"id\":1,\"command\":\"status\",\"params\":{\"verbose\":true}}", .invalidParams, true),
        ("{\"id\":1,\"command\":\"setUserVerified\"}", .invalidParams, true),
        ("{\"id\":1,\"command\":\"setUserVerified\",\"params\":{\"isUserVerified\":\"yes\"}}", .invalidParams, true),
        ("{\"id\":1,\"command\":\"presence\",\"params\":{\"mode\":\"sometimes\"}}", .invalidParams, true),
        ("{\"id\":1,\"command\":\"presence\",\"params\":{\"mode\":\"approve\",\"delayMs\":-1}}", .invalidParams, true),
        (
            "{\"id\":1,\"command\":\"setAttestation\",\"params\":{\"privateKey\":\"AQ\",\"certificate\":\"Ag\",\"rootCertificate\":\"Aw\",\"enterprisePrivateKey\":\"BA\"}}",
            .invalidParams, true
        ),
        (
            "{\"id\":1,\"command\":\"presence\",\"params\":{\"mode\":\"approve\",\"delayMs\":600001}}", .invalidParams,
            true
        ),
        ("{\"id\":1,\"command\":\"powerCycle\",\"params\":{\"offMs\":-1}}", .invalidParams, true),
        ("{\"id\":1,\"command\":\"presence\",\"params\":{\"mode\":\"approve\",\"delay\":1}}", .invalidParams, true),
        ("{\"id\":1,\"command\":\"removeCredential\",\"params\":{\"credentialId\":\"a+b\"}}", .invalidParams, true),
        ("{\"id\":1,\"command\":\"removeCredential\",\"params\":{\"credentialId\":12}}", .invalidParams, true),
        ("{\"id\":1,\"command\":\"setOption\",\"params\":{}}", .invalidParams, true),
        ("{\"id\":1,\"command\":\"injectFault\",\"params\":{\"kind\":\"meteor\"}}", .invalidParams, true),
        ("{\"id\":1,\"command\":\"trace\",\"params\":{\"path\":\"/t\",\"format\":\"pcap\"}}", .invalidParams, true),
        ("{\"id\":1,\"command\":\"trace\",\"params\":{\"path\":\"\"}}", .invalidParams, true),
        ("{\"id\":1,\"command\":\"setAttestation\",\"params\":{\"privateKey\":\"AQ\"}}", .invalidParams, true),
        (
            "{\"id\":1,\"command\":\"injectFault\",\"params\":{\"kind\":\"status\",\"command\":\"x\",\"status\":1}}",
            .invalidParams, true
        ),
        (
            "{\"id\":1,\"command\":\"injectFault\",\"params\":{\"kind\":\"status\",\"command\":\"getInfo\",\"status\":256}}",
            .invalidParams, true
        ),
        (
            "{\"id\":1,\"command\":\"injectFault\",\"params\":{\"kind\":\"dropReports\",\"direction\":\"up\"}}",
            .invalidParams, true
        ),
        (
            "{\"id\":1,\"command\":\"injectFault\",\"params\":{\"kind\":\"flashWriteFailure\",\"count\":0}}",
            .invalidParams, true
        ),
        (
            "{\"id\":1,\"command\":\"addCredential\",\"params\":{\"credentialId\":\"AA\",\"isResidentCredential\":true,\"rpId\":\"a\",\"privateKey\":\"AA\"}}",
            .invalidParams, true
        ),
        (
            "{\"id\":1,\"command\":\"addCredential\",\"params\":{\"credentialId\":\"\",\"isResidentCredential\":false,\"rpId\":\"a\",\"privateKey\":\"AA\"}}",
            .invalidParams, true
        ),
        (
            "{\"id\":1,\"command\":\"addCredential\",\"params\":{\"credentialId\":\"AA\",\"isResidentCredential\":false,\"rpId\":\"\",\"privateKey\":\"AA\"}}",
            .invalidParams, true
        ),
        (
            "{\"id\":1,\"command\":\"addCredential\",\"params\":{\"credentialId\":\"AA\",\"isResidentCredential\":false,\"rpId\":\"a\",\"privateKey\":\"AA\",\"signCount\":4294967296}}",
            .invalidParams, true
        ),
        (
            "{\"id\":1,\"command\":\"addCredential\",\"params\":{\"credentialId\":\"AA\",\"isResidentCredential\":false,\"rpId\":\"a\",\"privateKey\":\"AA\",\"largeBlob\":\"AA\"}}",
            .invalidParams, true
        ),
        (
            "{\"id\":1,\"command\":\"addCredential\",\"params\":{\"credentialId\":\"AA\",\"isResidentCredential\":false,\"rpId\":\"a\",\"privateKey\":\"AA\",\"colour\":1}}",
            .invalidParams, true
        ),
    ])
    func refusesMalformedRequests(text: String, code: ControlError.Code, keepsId: Bool) {
        let f = failure(text)
        #expect(f?.error.code == code)
        #expect((f?.id != nil) == keepsId)
    }

    @Test func failureMessagesAreJSON() throws {
        let line = ControlMessage.failure(id: "x", error: ControlError(.notFound, "no \"such\" credential"))
        let value = try JSONParser.parse(line)
        #expect(value["ok"] == false)
        #expect(value["id"] == "x")
        #expect(value["error"]?["code"] == "not-found")
        #expect(value["error"]?["message"] == "no \"such\" credential")
        #expect(
            try JSONParser.parse(ControlMessage.failure(id: nil, error: ControlError(.tooLarge, "")))["id"] == .null
        )
        #expect(
            try JSONParser.parse(ControlMessage.event("request", ["status": "ok"])) == [
                "event": "request", "status": "ok",
            ]
        )
    }
}

/// Every check fidosim conform knows, in the order a run takes them within each group.
package enum ConformanceSuite {
    package static let all: [ConformanceCheck] =
        HIDChecks.all + NFCChecks.all + InfoChecks.all + U2FChecks.all + CredentialChecks.makeCredential
        + ChoiceChecks.makeCredential
        + CredentialChecks.getAssertion + ChoiceChecks.getAssertion + CredentialChecks.selection + PINChecks.all
        + ChoiceChecks.clientPIN + ManagementChecks.credentialManagement + ChoiceChecks.credentialManagement
        + ManagementChecks.largeBlobs + ManagementChecks.config + ExtensionChecks.all + ResetChecks.all

    /// The check a destructive run starts with when it goes beyond the transport and getInfo.
    package static let blankStart = ResetChecks.blankStart
}

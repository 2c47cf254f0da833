/// U2F raw messages (FIDO U2F Raw Message Formats): requests and the parts of their answers.
package enum U2FMessage {
    package static let register: UInt8 = 0x01
    package static let authenticate: UInt8 = 0x02
    package static let version: UInt8 = 0x03
    package static let enforcePresence: UInt8 = 0x03
    package static let checkOnly: UInt8 = 0x07
    package static let dontEnforce: UInt8 = 0x08

    package static let noError: UInt16 = 0x9000
    package static let conditionsNotSatisfied: UInt16 = 0x6985
    package static let wrongData: UInt16 = 0x6A80
    package static let wrongLength: UInt16 = 0x6700
    package static let claNotSupported: UInt16 = 0x6E00
    package static let insNotSupported: UInt16 = 0x6D00

    /// An extended-length APDU (the encoding CTAP 2.1 §11.2.9.1.1's U2F messages use).
    package static func apdu(cla: UInt8 = 0, ins: UInt8, p1: UInt8 = 0, p2: UInt8 = 0, data: [UInt8]) -> [UInt8] {
        var out = [cla, ins, p1, p2]
        if !data.isEmpty {
            out += [0, UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data
        } else {
            out += [0]
        }
        return out + [0, 0]
    }

    /// A registration answer: 0x05, the user key, the key handle, the certificate, the signature.
    package struct Registration {
        package var publicKey: [UInt8]
        package var keyHandle: [UInt8]
        package var certificate: [UInt8]
        package var signature: [UInt8]

        package init(_ data: [UInt8]) throws(ClientError) {
            guard data.count > 67, data[0] == 0x05 else { throw .malformed("a registration answer not starting 0x05") }
            publicKey = Array(data[1..<66])
            let handleLength = Int(data[66])
            let certStart = 67 + handleLength
            guard data.count > certStart + 4 else { throw .malformed("a registration answer cut short") }
            keyHandle = Array(data[67..<certStart])
            // The certificate is one DER SEQUENCE: its length says where the signature starts.
            guard data[certStart] == 0x30 else { throw .malformed("the attestation certificate is not a DER SEQUENCE") }
            var length = Int(data[certStart + 1])
            var header = 2
            if length & 0x80 != 0 {
                let count = length & 0x7F
                guard (1...2).contains(count), data.count > certStart + 2 + count else {
                    throw .malformed("the certificate's DER length")
                }
                length = data[(certStart + 2)..<(certStart + 2 + count)].reduce(0) { $0 << 8 | Int($1) }
                header = 2 + count
            }
            let certEnd = certStart + header + length
            guard certEnd < data.count else { throw .malformed("a registration answer without a signature") }
            certificate = Array(data[certStart..<certEnd])
            signature = Array(data[certEnd...])
        }
    }
}

import CTAPCBOR

/// COSE encodings of public keys (RFC 9053 for EC2 and OKP keys, RFC 9964 for AKP keys).
enum COSEKey {
    /// An EC2 key: kty 2, alg, crv (1 P-256, 2 P-384, 3 P-521), x and y from the uncompressed point 0x04 | x | y.
    static func ec2(_ algorithm: CredentialAlgorithm, curve: Int, x963 point: [UInt8]) -> CBORValue {
        let size = (point.count - 1) / 2
        return [
            1: 2,
            3: CBORValue(algorithm.rawValue),
            -1: CBORValue(curve),
            -2: .byteString(Array(point[1..<(1 + size)])),
            -3: .byteString(Array(point[(1 + size)...])),
        ]
    }

    /// An OKP key: kty 1, alg, crv Ed25519 (6), x.
    static func okp(_ algorithm: CredentialAlgorithm, x: [UInt8]) -> CBORValue {
        [1: 1, 3: CBORValue(algorithm.rawValue), -1: 6, -2: .byteString(x)]
    }

    /// An AKP key (ML-DSA): kty 7, alg, pub.
    static func akp(_ algorithm: CredentialAlgorithm, publicKey: [UInt8]) -> CBORValue {
        [1: 7, 3: CBORValue(algorithm.rawValue), -1: .byteString(publicKey)]
    }
}

// swift-tools-version: 6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "fidosim",
    platforms: [.macOS(.v15)],
    // The modules are one package's parts, seen by each other at `package` access: nothing is public, so the only
    // products are the two programs.
    products: [
        .executable(name: "fidosim", targets: ["fidosim"]),
        .executable(name: "fidosim-proof", targets: ["fidosim-proof"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
    ],
    targets: [
        .target(name: "CTAPCBOR", swiftSettings: swiftSettings),
        .target(
            name: "Console",
            dependencies: [.product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: swiftSettings
        ),
        .target(name: "ControlProtocol", swiftSettings: swiftSettings),
        .target(name: "CTAPNFC", swiftSettings: swiftSettings),
        .target(name: "USBIP", swiftSettings: swiftSettings),
        .target(name: "FlashStore", swiftSettings: swiftSettings),
        .target(
            name: "FlashImage",
            dependencies: ["FlashStore", .product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: swiftSettings
        ),
        .target(name: "FlashStoreTesting", dependencies: ["FlashStore"], swiftSettings: swiftSettings),
        .target(name: "CTAPHID", swiftSettings: swiftSettings),
        // ECDSA on secp256k1 (ES256K), which swift-crypto lacks, through the system libcrypto.
        .systemLibrary(
            name: "CSecp256k1",
            path: "Sources/CSecp256k1",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(name: "Secp256k1", dependencies: ["CSecp256k1"], swiftSettings: swiftSettings),
        .target(
            name: "CTAPCore",
            dependencies: [
                "CTAPCBOR", "FlashStore", "Secp256k1",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Attestation",
            dependencies: [
                "CTAPCBOR", "ControlProtocol",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .systemLibrary(name: "CUHID", path: "Sources/CUHID"),
        .systemLibrary(name: "CUMockdev", path: "Sources/CUMockdev"),
        .systemLibrary(name: "CDatagrams", path: "Sources/CDatagrams"),
        .systemLibrary(name: "CProcessControl", path: "Sources/CProcessControl"),
        .systemLibrary(
            name: "CHIDAPI",
            path: "Sources/CHIDAPI",
            pkgConfig: "hidapi-hidraw",
            providers: [.apt(["libhidapi-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            path: "Sources/COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CPCSC",
            path: "Sources/CPCSC",
            pkgConfig: "libpcsclite",
            providers: [.apt(["libpcsclite-dev"])]
        ),
        .target(name: "HIDAPIDevice", dependencies: ["CHIDAPI"], swiftSettings: swiftSettings),
        .target(
            name: "FIDOClient",
            dependencies: [
                "CTAPCBOR", "HIDAPIDevice", "COpenSSL", "CPCSC",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ControlClient",
            dependencies: ["ControlProtocol", .product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Conformance",
            dependencies: ["FIDOClient", "CTAPCBOR", "Console", "ControlProtocol", "ControlClient"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Capture",
            dependencies: [
                "Conformance", "Profiles", "FIDOClient", "HIDAPIDevice", "CTAPCBOR", "ControlProtocol",
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CTAPCoreTesting",
            dependencies: [
                "CTAPCore", "CTAPCBOR", "FlashStore", .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Profiles",
            dependencies: ["CTAPCBOR", "CTAPCore", "ControlProtocol"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "VirtualKey",
            dependencies: [
                "CTAPCBOR", "CTAPHID", "CTAPNFC", "CTAPCore", "ControlProtocol", "Profiles",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HIDBridge",
            dependencies: [
                "Profiles",
                "VirtualKey",
                "CTAPCBOR", "CTAPHID", "CTAPNFC", "USBIP", "CTAPCore", "CUHID", "CUMockdev", "CDatagrams",
                "CProcessControl",
                "Console",
                "ControlProtocol",
                "FlashImage",
                "HIDAPIDevice",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Benchmark",
            dependencies: [
                "Profiles",
                "CTAPCBOR", "CTAPCore", "CTAPHID", "CProcessControl", "Console", "ControlProtocol", "FlashImage",
                "FlashStore",
                "FIDOClient",
                "HIDAPIDevice",
                "HIDBridge", "VirtualKey",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "WebDriverFront",
            dependencies: ["HIDBridge", "ControlClient", "ControlProtocol", "Console", "Profiles"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "FidosimCommands",
            dependencies: [
                "Capture", "Profiles",
                "Benchmark", "HIDBridge", "WebDriverFront", "VirtualKey", "CTAPCore", "CTAPCBOR", "Console",
                "FlashImage", "FlashStore",
                "ControlProtocol",
                "Attestation",
                "FIDOClient", "Conformance", "CProcessControl", "ControlClient", "HIDAPIDevice",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "fidosim",
            dependencies: ["FidosimCommands"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "fidosim-proof",
            dependencies: [
                "Benchmark", "CTAPCBOR", "CTAPCore", "CTAPCoreTesting", "FlashImage", "FlashStore", "FlashStoreTesting",
                "HIDBridge", "Console",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "CTAPCBORTests", dependencies: ["CTAPCBOR", "FlashStore"], swiftSettings: swiftSettings),
        .testTarget(name: "CTAPNFCTests", dependencies: ["CTAPNFC"], swiftSettings: swiftSettings),
        .testTarget(name: "USBIPTests", dependencies: ["USBIP"], swiftSettings: swiftSettings),
        .testTarget(name: "ControlProtocolTests", dependencies: ["ControlProtocol"], swiftSettings: swiftSettings),
        .testTarget(
            name: "AttestationTests",
            dependencies: [
                "Attestation", "CTAPCore", .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"), .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FlashStoreTests",
            dependencies: ["FlashStore", "FlashStoreTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "FlashImageTests", dependencies: ["FlashImage", "FlashStore"], swiftSettings: swiftSettings),
        .testTarget(name: "CTAPHIDTests", dependencies: ["CTAPHID"], swiftSettings: swiftSettings),
        .testTarget(
            name: "ConformanceTests",
            dependencies: ["Profiles", "Conformance", "ControlProtocol", "FIDOClient", "CTAPCore", "VirtualKey"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FIDOClientTests",
            dependencies: [
                "FIDOClient", "HIDAPIDevice", "CTAPCBOR", "Attestation", "Secp256k1",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CTAPCoreTests",
            dependencies: [
                "CTAPCore", "CTAPCBOR", "FlashStore", "CTAPCoreTesting", "Attestation", "Secp256k1",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HIDBridgeTests",
            dependencies: [
                "Profiles",
                "HIDBridge", "VirtualKey", "CTAPHID", "CTAPNFC", "CTAPCore", "CTAPCoreTesting", "ControlProtocol",
                "WebDriverFront",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FidosimCommandsTests",
            dependencies: [
                "HIDBridge",
                "Profiles",
                "FidosimCommands", "VirtualKey",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)

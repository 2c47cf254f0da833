package import Profiles

/// How `serve`'s `--transport` options combine, worked out once: the key's one HID transport (udp, uhid, hid, gadget,
/// private, or usbip alone), whether the key is also a card in vpcd's reader (pcsc), and whether USB/IP exports it
/// beside its HID transport to another host.
///
/// Pure: the options in, the plan or why they do not combine out.
package struct TransportPlan: Equatable, Sendable {
    /// The HID transport (`auto` until the machine decides: uhid when /dev/uhid is writable, else udp; `pcsc` when
    /// the key is only a card).
    package var hid: TransportChoice
    package var card: Bool
    package var alsoUSBIP: Bool

    package init(hid: TransportChoice, card: Bool = false, alsoUSBIP: Bool = false) {
        self.hid = hid
        self.card = card
        self.alsoUSBIP = alsoUSBIP
    }

    /// The plan for `--transport` given these times (none: auto); the message says why they do not combine.
    package init(_ given: [TransportChoice]) throws(KeySetupError) {
        let hidTransports = given.filter { $0 != .pcsc && $0 != .usbip }
        guard hidTransports.count <= 1, given.filter({ $0 == .pcsc }).count <= 1,
            given.filter({ $0 == .usbip }).count <= 1, !(hidTransports == [.auto] && given.count > 1)
        else {
            throw KeySetupError(
                "--transport: one of udp, uhid, hid, gadget, with usbip and pcsc beside it or alone; auto only alone "
                    + "(given: " + given.map(\.rawValue).joined(separator: ", ") + ")"
            )
        }
        card = given.contains(.pcsc)
        // usbip beside another HID transport joins it; alone it is the key's one HID transport.
        alsoUSBIP = given.contains(.usbip) && !hidTransports.isEmpty
        hid = hidTransports.first ?? (given.contains(.usbip) ? .usbip : card ? .pcsc : .auto)
    }

    /// `fidosim run` and `webdriver`: the private key, with the card and USB/IP beside it if given.
    package func forcing(_ choice: TransportChoice) -> TransportPlan {
        TransportPlan(hid: choice, card: card, alsoUSBIP: alsoUSBIP || hid == .usbip)
    }
}

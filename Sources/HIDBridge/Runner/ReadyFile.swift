import Console
package import ControlProtocol
import USBIP
import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// What `serve --ready-file` writes once every key is up: one JSON line that a test rig reads instead of the
/// status lines meant for people (firmware-spec/control.md, "The ready file").
package enum ReadyFile {
    /// The record of the keys `serve` started: `version`, `pid`, `keys` (one object per key) and, for the common
    /// case of one key, the first key's members again at the top level.
    package static func record(slots: [SlotIO], flashes: [String], pid: Int32) -> JSONValue {
        let keys = zip(slots, flashes).map { key($0, flash: $1) }
        var top: [String: JSONValue] = ["version": .integer(1), "pid": .integer(Int64(pid)), "keys": .array(keys)]
        if let first = keys.first?.objectValue {
            for (name, value) in first { top[name] = value }
        }
        return .object(top)
    }

    static func key(_ slot: SlotIO, flash: String) -> JSONValue {
        var out = transportMembers(slot.transport, card: slot.card)
        out["name"] = .string(slot.slot.name)
        out["control"] = slot.control.map { .string($0.path) } ?? .null
        out["flash"] = .string(flash)
        return .object(out)
    }

    /// Where a transport can be reached: `transport` (udp, uhid, gadget, hid) and its address members.
    package static func transportMembers(_ transport: any ReportTransport, card: VPCDCard? = nil) -> [String: JSONValue]
    {
        var out: [String: JSONValue] = [:]
        if let card {
            out["vpcdHost"] = .string(card.host)
            out["vpcdPort"] = .integer(Int64(card.port))
        }
        switch transport {
        case let joined as JoinedTransport:
            // The first member's members, and the USB/IP server's address beside them.
            for member in joined.members.dropFirst().reversed() {
                if let usbip = member as? USBIPTransport {
                    out["usbipHost"] = .string(usbip.host)
                    out["usbipPort"] = .integer(Int64(usbip.port))
                    out["busId"] = .string(usbip.device.busID)
                }
            }
            if let first = joined.members.first {
                out.merge(transportMembers(first)) { _, primary in primary }
            }
        case is NoReportTransport:
            out["transport"] = .string("pcsc")
        case let udp as UDPTransport:
            out["transport"] = .string("udp")
            out["host"] = .string(udp.host)
            out["port"] = .integer(Int64(udp.port))
        case let uhid as UHIDTransport:
            out["transport"] = .string("uhid")
            out["serial"] = .string(uhid.info.serial)
            out["vendorId"] = .integer(Int64(uhid.info.vendorID))
            out["productId"] = .integer(Int64(uhid.info.productID))
        case let gadget as GadgetTransport:
            out["transport"] = .string("gadget")
            out["device"] = .string(gadget.node)
        case let usbip as USBIPTransport:
            out["transport"] = .string("usbip")
            out["host"] = .string(usbip.host)
            out["port"] = .integer(Int64(usbip.port))
            out["busId"] = .string(usbip.device.busID)
            out["serial"] = .string(usbip.device.serial)
        case let key as PrivateHIDTransport:
            let tree = key.tree
            out["transport"] = .string("private")
            out["devnode"] = .string(tree.devnode)
            out["serial"] = .string(tree.info.serial)
            out["vendorId"] = .integer(Int64(tree.info.vendorID))
            out["productId"] = .integer(Int64(tree.info.productID))
            out["umockdevDir"] = .string(key.testbed.root)
        case let board as HIDAPITransport:
            out["transport"] = .string("hid")
            out["device"] = .string(board.summary)
        default:
            out["transport"] = .string(transport.summary)
        }
        return out
    }

    /// Writes `record` and a newline to `path` whole (WholeFile: a reader that sees the file sees all of it, and a
    /// symbolic link planted at `path` is replaced, never written through).
    /// `secret`: the record holds one (the WebDriver endpoint's path), so the file goes only into a folder no other
    /// user may write.
    package static func write(_ record: JSONValue, to path: String, secret: Bool = false) throws(TransportError) {
        do {
            try WholeFile.write(Array((record.encoded + "\n").utf8), to: path, secret: secret)
        } catch {
            throw TransportError("--ready-file \(error)")
        }
    }
}

import CUMockdev
import DequeModule
import Dispatch
import HIDAPIDevice
import Synchronization
import SystemPackage
package import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// The key as a hidraw device in this process's umockdev testbed: programs started with the testbed's environment
/// (`fidosim run`, the environment file of `serve --transport private`) find `/dev/hidrawN` and its sysfs devices
/// as they find a USB key, without root, uhid or a VM (firmware-spec/private-key.md).
///
/// The node is a pseudo-terminal that umockdev made, and every `read`, `write` and `ioctl` a client makes on it
/// comes here through umockdev's ioctl handler, on umockdev's worker thread:
///
/// - ioctls are answered as hidraw answers them (``HidrawNode``);
/// - a `write` is one output report, handed to the run loop;
/// - readiness is kept in the terminal: one byte waits there for each report that waits for the host, so `poll` and
///   `epoll` say readable exactly when a report waits. A `read` first lets the client read the terminal itself
///   (so a blocking descriptor blocks and a non-blocking one says EAGAIN, as the client opened it), then answers
///   with one whole report, cut to the client's buffer, and puts back the bytes that stand for reports still waiting.
package final class PrivateHIDTransport: ReportTransport {
    let testbed: PrivateTestbed
    let node: PrivateNode

    package init(tree: PrivateDeviceTree, testbed: PrivateTestbed) throws(TransportError) {
        self.testbed = testbed
        node = try PrivateNode(tree: tree, testbed: testbed)
        try node.plug()
    }

    /// The devices of the current plug-in.
    package var tree: PrivateDeviceTree { node.state.withLock { $0.tree } }

    package var descriptor: Int32 { node.incoming.wakeRead.rawValue }
    package var summary: String {
        "a private hidraw node \(tree.devnode) in \(testbed.root) (\(tree.info.name), serial \(tree.info.serial))"
    }

    package func receive() -> TransportEvent? {
        guard let report = node.incoming.next() else { return nil }
        return .report(report)
    }

    package func send(_ report: [UInt8]) {
        pacer.wait()
        node.send(report)
    }

    /// Paced like a full-speed interrupt endpoint, as the uhid key is (a burst of 32, then one per millisecond):
    /// hidraw keeps 64 reports for a reader.
    var pacer = ReportPacer(burst: 32, intervalNs: 1_000_000)

    package func replug() throws(TransportError) {
        try unplug()
        try plug()
    }

    package func unplug() throws(TransportError) { node.unplug() }
    package func plug() throws(TransportError) { try node.plug() }

    /// The key is removed: unplugged, and its wake-up pipe and its descriptor of the terminal's client side closed.
    /// The node object stays (umockdev holds it for its handler's callbacks, which answer a client still holding
    /// the removed node as a gone device's), and so do the terminal and handler socket umockdev keeps.
    package func retire() throws(TransportError) {
        node.unplug()
        node.incoming.close()
        let peer = node.state.withLock { state -> Int32 in
            defer { state.peer = -1 }
            return state.peer
        }
        if peer >= 0 { Glibc.close(peer) }
    }
}

/// One private hidraw node: what the run loop and umockdev's threads share.
final class PrivateNode: Sendable {
    let testbed: PrivateTestbed
    let node: HidrawNode
    /// The ioctl handler umockdev calls (attached to each plug-in's node before the node exists).
    let handler: UInt
    /// Reports from the host, waiting for the run loop.
    let incoming: UHIDEventQueue
    /// Reads that wait for the terminal, one at a time, off umockdev's thread.
    let reader = DispatchQueue(label: "fidosim.private.read")
    let state: Mutex<NodeState>

    /// What the threads share.
    struct NodeState {
        /// The devices of the current (or last) plug-in.
        var tree: PrivateDeviceTree
        /// Counts plug-ins: a client of an earlier plug-in gets the errors of a device that is gone.
        var generation = 0
        var plugged = false
        /// The testbed's side of the node's terminal, and a descriptor of the client side for emptying it.
        var master: Int32 = -1
        var peer: Int32 = -1
        /// Reports for the host, oldest first (at most hidraw's 64).
        var waiting: Deque<[UInt8]> = []
        /// Reports that found `waiting` full: held back, not dropped, and moved up as the reader takes reports.
        var held: Deque<[UInt8]> = []
        /// Connected clients (GObject pointers, one reference held each) and the plug-in they opened.
        var clients: [UInt: Int] = [:]
    }

    init(tree: PrivateDeviceTree, testbed: PrivateTestbed) throws(TransportError) {
        self.testbed = testbed
        state = Mutex(NodeState(tree: tree))
        node = HidrawNode(info: tree.info, phys: tree.phys)
        incoming = try UHIDEventQueue()
        var api = try UMockdevLibrary.api()
        guard let base = api.ioctl_base_new!() else { throw TransportError("umockdev could not make an ioctl handler") }
        handler = UInt(bitPattern: base)
        // The node lives as long as the process: umockdev holds this reference.
        let context = Unmanaged.passRetained(self).toOpaque()
        fidosim_umockdev_connect(
            &api,
            base,
            "handle-ioctl",
            { _, client, context in
                guard let client, let context else { return 0 }
                Unmanaged<PrivateNode>.fromOpaque(context).takeUnretainedValue().handleIoctl(client)
                return 1
            },
            context
        )
        fidosim_umockdev_connect(
            &api,
            base,
            "handle-write",
            { _, client, context in
                guard let client, let context else { return 0 }
                Unmanaged<PrivateNode>.fromOpaque(context).takeUnretainedValue().handleWrite(client)
                return 1
            },
            context
        )
        fidosim_umockdev_connect(
            &api,
            base,
            "handle-read",
            { _, client, context in
                guard let client, let context else { return 0 }
                Unmanaged<PrivateNode>.fromOpaque(context).takeUnretainedValue().handleRead(client)
                return 1
            },
            context
        )
        fidosim_umockdev_connect_client(
            &api,
            base,
            { _, client, context in
                guard let client, let context else { return }
                Unmanaged<PrivateNode>.fromOpaque(context).takeUnretainedValue().connected(client)
            },
            context
        )
    }

    var api: fidosim_umockdev { UMockdevLibrary.ready }

    /// Reports held back behind a full buffer, at most.
    static let maxHeld = 4096

    func send(_ report: [UInt8]) {
        state.withLock { state in
            guard state.plugged else { return }
            // hidraw drops a report that finds its reader's 64 full; here a reader slowed by a loaded machine loses
            // nothing (a test must not fail for the machine's load): the report waits its turn (at most 4,096).
            guard state.waiting.count < HidrawNode.bufferedReports else {
                if state.held.count < Self.maxHeld { state.held.append(report) }
                return
            }
            state.waiting.append(report)
            Self.putMarkers(1, master: state.master)
        }
    }

    func unplug() {
        let (master, tree) = state.withLock { state -> (Int32, PrivateDeviceTree) in
            guard state.plugged else { return (-1, state.tree) }
            state.plugged = false
            state.generation += 1
            state.waiting.removeAll()
            state.held.removeAll()
            return (state.master, state.tree)
        }
        guard master >= 0 else { return }
        for path in tree.syspathsChildrenFirst { testbed.remove(syspath: path) }
        // A client blocked reading the old node wakes up and gets the error of a device that is gone.
        Self.putMarkers(1, master: master)
    }

    /// Adds the devices of a new plug-in: a new hidraw node (umockdev keeps a removed node's terminal, so each
    /// plug-in has its own, as the kernel gives each its own hidraw device) and a new HID sequence number.
    func plug() throws(TransportError) {
        var tree = state.withLock { $0.tree }
        let numbers = testbed.plugNumbers(preferred: tree.index)
        tree.minor = numbers.minor
        tree.sequence = numbers.sequence
        // The handler is in place before the node exists: a client that opens the node on its add uevent (Firefox
        // does) must meet hidraw's answers, never umockdev's default ones.
        guard let base = UnsafeMutableRawPointer(bitPattern: handler) else { return }
        try testbed.attach(devnode: tree.devnode, handler: base)
        // The clients of the coming node belong to a new generation, and are served from its add uevent on (no
        // report goes to the host before this returns: the run loop that sends them is the caller).
        state.withLock { state in
            state.generation += 1
            state.tree = tree
            state.master = -1
            state.plugged = true
        }
        for record in tree.records { try testbed.add(record: record) }
        let master = testbed.masterDescriptor(devnode: tree.devnode)
        guard master >= 0 else { throw TransportError("umockdev made no node for \(tree.devnode)") }
        // Raw: every byte counts as it is; non-blocking: the run loop never waits on the terminal.
        var mode = termios()
        if tcgetattr(master, &mode) == 0 {
            cfmakeraw(&mode)
            _ = tcsetattr(master, TCSANOW, &mode)
        }
        _ = fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK)
        let peer = fidosim_pty_peer(master)
        let old = state.withLock { state -> Int32 in
            let old = state.peer
            state.master = master
            state.peer = peer
            return old
        }
        // The earlier node's master stays the testbed's; only fidosim's own descriptor of its client side closes.
        if old >= 0 { Glibc.close(old) }
    }

    /// Writes `count` readiness bytes into the terminal.
    static func putMarkers(_ count: Int, master: Int32) {
        guard count > 0, master >= 0 else { return }
        let bytes = [UInt8](repeating: 0x2A, count: count)
        _ = bytes.withUnsafeBytes { Glibc.write(master, $0.baseAddress, $0.count) }
    }

    /// Empties the terminal of readiness bytes (the reports they stood for are gone).
    static func drainMarkers(peer: Int32) {
        guard peer >= 0 else { return }
        var sink = [UInt8](repeating: 0, count: 256)
        while sink.withUnsafeMutableBytes({ Glibc.read(peer, $0.baseAddress, $0.count) }) > 0 {}
    }

    // MARK: umockdev's side (its worker thread, and the reader queue)

    func generation(of client: UnsafeMutableRawPointer) -> Int? {
        state.withLock { $0.clients[UInt(bitPattern: client)] }
    }

    /// A new opener: hidraw gives every open file its own buffer, so reports left for a host program that closed the
    /// node are not read by the next one. (Clients that stay open at once share one buffer here.)
    func connected(_ client: UnsafeMutableRawPointer) {
        let api = self.api
        _ = api.object_ref!(client)
        var gone: [UInt] = []
        state.withLock { state in
            for (other, _) in state.clients {
                if let pointer = UnsafeMutableRawPointer(bitPattern: other),
                    api.ioctl_client_get_connected!(pointer) == 0
                {
                    gone.append(other)
                }
            }
            for other in gone { state.clients[other] = nil }
            let alone = state.clients.values.allSatisfy { $0 != state.generation }
            state.clients[UInt(bitPattern: client)] = state.generation
            if alone && !state.waiting.isEmpty {
                state.waiting.removeAll()
                state.held.removeAll()
                Self.drainMarkers(peer: state.peer)
            }
        }
        for other in gone { api.object_unref!(UnsafeMutableRawPointer(bitPattern: other)) }
    }

    func current(_ client: UnsafeMutableRawPointer) -> Bool {
        state.withLock { state in state.plugged && state.clients[UInt(bitPattern: client)] == state.generation }
    }

    func handleIoctl(_ client: UnsafeMutableRawPointer) {
        let api = self.api
        // A node whose device is gone answers ENODEV, as hidraw does.
        guard current(client) else { return api.ioctl_client_complete!(client, -1, ENODEV) }
        let request = HidrawNode.Request(api.ioctl_client_get_request!(client))
        switch node.answer(request) {
        case .error(let code):
            api.ioctl_client_complete!(client, -1, code)
        case .fill(let load):
            guard let argument = api.ioctl_client_get_arg!(client) else {
                return api.ioctl_client_complete!(client, -1, EFAULT)
            }
            var error: UnsafeMutablePointer<fidosim_gerror>?
            guard let block = api.ioctl_data_resolve!(argument, 0, load, &error), let data = block.pointee.data else {
                if let error { api.error_free!(error) }
                return api.ioctl_client_complete!(client, -1, EFAULT)
            }
            var bytes = Array(UnsafeBufferPointer(start: data, count: min(load, Int(block.pointee.data_len))))
            switch node.fill(request, &bytes) {
            case .success(let result):
                api.ioctl_data_update!(block, 0, bytes, Int32(bytes.count))
                api.ioctl_client_complete!(client, result, 0)
            case .failure(let error):
                api.ioctl_client_complete!(client, -1, error.code)
            }
        }
    }

    func handleWrite(_ client: UnsafeMutableRawPointer) {
        let api = self.api
        guard current(client) else { return api.ioctl_client_complete!(client, -1, ENODEV) }
        guard let argument = api.ioctl_client_get_arg!(client) else {
            return api.ioctl_client_complete!(client, -1, EFAULT)
        }
        let count = Int(argument.pointee.data_len)
        let bytes = argument.pointee.data.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
        switch HidrawNode.report(fromWrite: bytes) {
        case .success(let report):
            incoming.push(report)
            api.ioctl_client_complete!(client, count, 0)
        case .failure(let error):
            api.ioctl_client_complete!(client, -1, error.code)
        }
    }

    func handleRead(_ client: UnsafeMutableRawPointer) {
        let api = self.api
        _ = api.object_ref!(client)
        let address = UInt(bitPattern: client)
        reader.async { [self] in
            guard let client = UnsafeMutableRawPointer(bitPattern: address) else { return }
            serveRead(client)
            api.object_unref!(client)
        }
    }

    /// Answers one `read()`: the client reads the terminal itself first, which waits (or says EAGAIN) as its
    /// descriptor does; each byte it took stands for a waiting report, one of which it gets.
    func serveRead(_ client: UnsafeMutableRawPointer) {
        let api = self.api
        guard let argument = api.ioctl_client_get_arg!(client) else {
            return api.ioctl_client_complete!(client, -1, EFAULT)
        }
        let count = Int(argument.pointee.data_len)
        while true {
            var code: Int32 = 0
            var error: UnsafeMutablePointer<fidosim_gerror>?
            let taken = Int(api.ioctl_client_execute!(client, &code, &error))
            if let error {
                api.error_free!(error)
                return api.ioctl_client_complete!(client, -1, EIO)
            }
            guard taken > 0 else {
                // The terminal's own answer: EAGAIN for a non-blocking descriptor with nothing waiting, 0 for a
                // read of nothing.
                return api.ioctl_client_complete!(client, taken, code)
            }
            enum Outcome {
                case report([UInt8])
                case gone, again
            }
            let outcome = state.withLock { state -> Outcome in
                guard state.plugged, state.clients[UInt(bitPattern: client)] == state.generation else { return .gone }
                guard let report = state.waiting.popFirst() else { return .again }
                var back = min(taken - 1, state.waiting.count)
                if let next = state.held.popFirst() {
                    state.waiting.append(next)
                    back += 1
                }
                Self.putMarkers(back, master: state.master)
                return .report(report)
            }
            switch outcome {
            case .gone:
                // hidraw's read of a device that is gone.
                return api.ioctl_client_complete!(client, -1, EIO)
            case .again:
                // The bytes stood for reports a new opener discarded: read again.
                continue
            case .report(let report):
                let answer = HidrawNode.readResult(report, count: count)
                api.ioctl_data_update!(argument, 0, answer, Int32(answer.count))
                return api.ioctl_client_complete!(client, answer.count, 0)
            }
        }
    }
}

/// Who acts on the key where a request needs a person: a touch, a refusal, a replug.
package protocol DeviceOperator: AnyObject {
    /// True when the runner can make the key act without a person (fidosim through its control socket).
    var isAutomatic: Bool { get }
    /// A request that needs a touch comes next; `what` says which.
    func touchNeeded(_ what: String) throws
    /// The next request that asks for a touch must be refused (OPERATION_DENIED).
    func refuseNextTouch() throws
    /// The next request that asks for a touch must wait for one that does not come (it will be cancelled).
    func holdTouch() throws
    /// Back to approving touches after `refuseNextTouch` or `holdTouch`.
    func restore() throws
    /// Unplug the key and plug it back in. Returns when the key can be opened again.
    func powerCycle() throws
}

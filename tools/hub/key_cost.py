"""What a key added at run time costs (make key-cost): a `fidosim serve --keys 0 --hub` on each transport that can
hot-plug here (UDP, and the private hidraw key), N keys added through the hub one after another, then removed.
Prints the memory per key (the process's resident set before and after), the time an add takes (from the request to
the answer: the key's image, authenticator, device and control socket made), the descriptors per key, and what
that makes of the process's descriptor limit.

    python3 tools/hub/key_cost.py [BIN] [N]"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time

from fidosim import FidosimServer, VirtualAuthenticatorOptions


def status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def measure(binary: str, transport: str, count: int) -> None:
    with FidosimServer(binary=binary, transport=transport, keys=0, hub=True) as server:
        pid = server.process.pid
        hub = server.hub
        hub.list_virtual_authenticators()
        rss0, fd0 = status_kib(pid, "VmRSS"), fds(pid)
        times = []
        options = VirtualAuthenticatorOptions(has_resident_key=True, has_user_verification=True,
                                              is_user_verified=True)
        for _ in range(count):
            started = time.perf_counter()
            hub.add_virtual_authenticator(options)
            times.append((time.perf_counter() - started) * 1000)
        rss1, fd1 = status_kib(pid, "VmRSS"), fds(pid)
        started = time.perf_counter()
        for entry in hub.list_virtual_authenticators():
            hub.remove_virtual_authenticator(entry["authenticatorId"])
        removing = (time.perf_counter() - started) * 1000 / count
        rss2, fd2 = status_kib(pid, "VmRSS"), fds(pid)
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        per_fd = (fd1 - fd0) / count
        times.sort()
        print(f"{transport}: {count} keys added through the hub")
        print(f"  resident memory: {rss0 / 1024:.1f} MiB with none, {rss1 / 1024:.1f} MiB with {count}: "
              f"{(rss1 - rss0) / count:.0f} KiB per key; {rss2 / 1024:.1f} MiB after removing them all")
        print(f"  add: median {statistics.median(times):.1f} ms, "
              f"95th percentile {times[int(0.95 * (count - 1))]:.1f} ms, "
              f"slowest {times[-1]:.1f} ms; remove: {removing:.1f} ms each")
        print(f"  descriptors: {per_fd:.1f} per key ({fd0} with none, {fd1} with {count}, {fd2} after removing); "
              f"with this process's limit of {limit} the hub holds about {int((limit - fd0 - 16) / per_fd)} keys")


if __name__ == "__main__":
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FIDOSIM_BIN", ".build/debug/fidosim")
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    for transport in ("udp", "private"):
        measure(binary, transport, count)

"""`fidosim bench --only udp`: a fidosim serve child started without Foundation's Process (posix_spawn), driven over
UDP one request at a time and with four channels in flight; every row is a real measurement (requests answered).
And `serve --busy-poll`: it answers as before, and stays awake only for its window."""

import os
import re
import subprocess
import time

import pytest
from fido2.ctap2 import Ctap2
from fido2.webauthn import ResidentKeyRequirement

from fidosim import find_binary
from fidosim.testing import RP_ID, make_client, make_server, new_cdh, new_user, web_authenticate, web_register

BIN = str(find_binary())


def test_bench_udp_rows_measure_answered_requests():
    run = subprocess.run([BIN, "bench", "--only", "udp", "--seconds", "0.3"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    rows = dict(re.findall(r"^(getAssertion over UDP[^:]*): (\d+)/s", run.stdout, re.M))
    assert set(rows) == {"getAssertion over UDP (client process -> fidosim serve)",
                         "getAssertion over UDP, 4 channels in flight (throughput)",
                         "getAssertion over UDP, serve --busy-poll 200",
                         "getAssertion over UDP, --busy-poll 200, 4 channels in flight"}, run.stdout
    assert all(int(v) > 0 for v in rows.values()), run.stdout
    assert "failed" not in run.stdout
    # Each UDP row is compared with raw signing in slices alternating with its own.
    assert len(re.findall(r"^getAssertion over UDP.*% of raw signing interleaved$", run.stdout, re.M)) == 4, run.stdout
    # The busy-poll server and the bench get a CPU each where there are two.
    if len(os.sched_getaffinity(0)) >= 2:
        assert re.search(r"udp server pid \d+ \(--busy-poll\); client on CPU \d+, server on CPU \d+$", run.stdout,
                         re.M), run.stdout
    # What the hypervisor took from this machine during the run, which the UDP rows depend on.
    assert re.search(r"^CPU time the hypervisor gave to others during the run \(steal\): \d+%$", run.stdout,
                     re.M), run.stdout
    # The children are gone after the run (SIGTERM and waitpid).
    pids = [int(p) for p in re.findall(r"udp server pid (\d+)", run.stdout)]
    assert len(pids) == 2, run.stdout
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)


def test_full_bench_measures_every_row():
    """`make bench`'s table: getAssertion and both makeCredentials in process, through CTAPHID and over UDP, the
    busy-poll and flash rows, each a real measurement, then start-up time and memory of `serve`."""
    run = subprocess.run([BIN, "bench", "--seconds", "0.05"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "failed" not in run.stdout, run.stdout
    rows = {name: (int(rate), int(ratio)) for name, rate, ratio in
            re.findall(r"^\| ([^|]+?) \| (\d+) \| [\d.]+ \| [\d.]+ \| (\d+)% \|$", run.stdout, re.M)}
    expected = ["raw ES256 signature, DER (swift-crypto)", "getAssertion in process (allowList, up=false)",
                "getAssertion through CTAPHID in process", "getAssertion over UDP (client process -> fidosim serve)",
                "getAssertion over UDP, 4 channels in flight (throughput)",
                "CTAPHID PING over UDP, one report each way (the transport's floor)",
                "getAssertion over a private hidraw node (fidosim run: client process -> key)",
                "getAssertion over UDP, serve --busy-poll 200",
                "getAssertion over UDP, --busy-poll 200, 4 channels in flight",
                "getAssertion in process, 1 discoverable stored (flash)",
                "getAssertion in process, 10,000 discoverable stored (flash)",
                "makeCredential in process (discoverable), 10,000 stored (flash)",
                "getAssertion over UDP, 10,000 discoverable stored (flash)"]
    for path in ["in process", "through CTAPHID in process", "over UDP"]:
        expected += [f"makeCredential {path} (non-discoverable)", f"makeCredential {path} (discoverable, 100 users)"]
    assert sorted(rows) == sorted(expected), run.stdout
    # Each row counted executions (at least 1/s). Its ratio to raw signing parses (the \d+% above) but has no floor:
    # on a loaded machine 88/s rounds to 0% of raw signing, and is still a measurement.
    assert all(rate > 0 for rate, _ in rows.values()), run.stdout
    assert rows["raw ES256 signature, DER (swift-crypto)"][1] == 100
    assert re.search(r"^\| empty store \(--flash memory\) \| [\d.]+ ms \| \d+ MiB \| \d+ MiB \|$", run.stdout, re.M)
    assert re.search(r"^\| 10,000 discoverable credentials \(flash image\) \| [\d.]+ ms \| \d+ MiB \| \d+ MiB \|$",
                     run.stdout, re.M)


def test_bench_private_row_measures_a_private_hidraw_key():
    """`fidosim bench --only private`: getAssertion through the hidraw node of a key that `fidosim run` serves, by a
    bench inside its tree (hidapi, as a host program reaches a key)."""
    run = subprocess.run([BIN, "bench", "--only", "private", "--seconds", "0.2"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    match = re.search(r"^getAssertion over a private hidraw node \(fidosim run: client process -> key\): (\d+)/s",
                      run.stdout, re.M)
    assert match and int(match.group(1)) > 0, run.stdout


def test_bench_refuses_a_measurement_too_short_to_run():
    run = subprocess.run([BIN, "bench", "--seconds", "0"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run
    assert "--seconds takes 0.05 to 3600" in run.stderr


def test_bench_refuses_an_unknown_only():
    run = subprocess.run([BIN, "bench", "--only", "nothing"], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "--only takes get-assertion, ctaphid, flash, udp or private" in run.stderr


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def voluntary_switches(pid: int) -> int:
    """How many times the key's main thread (its run loop) has blocked, from /proc/PID/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc/PID/status")


def cpu_while_pinging(sim, seconds: float = 1.0, gap: float = 0.005, at_least: int = 20) -> tuple[float, int, int]:
    """The key's CPU time, its run loop's sleeps (voluntary context switches) and the pings sent, while it is
    pinged every `gap` seconds for `seconds`, and at least `at_least` times however slow the machine is. The sleeps
    do not depend on how busy the machine is; CPU time does."""
    dev = sim.device()
    before, slept = cpu_seconds(sim.process.pid), voluntary_switches(sim.process.pid)
    end = time.monotonic() + seconds
    pings = 0
    while pings < at_least or time.monotonic() < end:
        assert dev.ping(b"awake?") == b"awake?"
        pings += 1
        time.sleep(gap)
    return cpu_seconds(sim.process.pid) - before, voluntary_switches(sim.process.pid) - slept, pings


@pytest.mark.sim_args("--busy-poll", "10000")
def test_busy_poll_answers_stays_awake_between_requests_and_sleeps_when_idle(sim):
    dev = sim.device()
    server, client = make_server(), make_client(dev)[0]
    result, auth_data = web_register(server, client, new_user(), ResidentKeyRequirement.DISCOURAGED)
    cred = auth_data.credential_data
    for _ in range(20):
        assert web_authenticate(server, client, [cred]).raw_id == cred.credential_id
    assert Ctap2(dev).get_assertion(RP_ID, new_cdh(), [{"type": "public-key", "id": cred.credential_id}],
                                    options={"up": False}).credential["id"] == cred.credential_id
    # Requests 5 ms apart, inside the 10 ms window: the loop never sleeps (a key without busy-poll sleeps once per
    # ping: the next test). Counted in sleeps, not CPU time, which another busy process on the machine would take.
    _, sleeps, pings = cpu_while_pinging(sim)
    assert pings >= 20 and sleeps <= pings // 10, (sleeps, pings)
    # Idle: after its window the loop sleeps in poll again. Spinning for the whole second would cost up to a
    # second of CPU time (a third of one with two busy processes on two cores); sleeping costs the 100 ms wake-ups
    # of the timer only (0.00 s, loaded or not). Not a speed: the bound is generous, and a looser one would miss
    # a spinning key on a busy machine.
    pid = sim.process.pid
    time.sleep(0.2)
    before = cpu_seconds(pid)
    time.sleep(1.0)
    assert cpu_seconds(pid) - before < 0.2


def test_without_busy_poll_the_key_sleeps_between_requests(sim):
    cpu, sleeps, pings = cpu_while_pinging(sim)
    # The key's own work for the pings (about 0.07 s, loaded or not), far under a spinning loop's; generous.
    assert cpu < 0.25
    assert pings >= 20 and sleeps >= pings // 2, (sleeps, pings)


def test_busy_poll_out_of_range_is_refused():
    run = subprocess.run([BIN, "serve", "--transport", "udp", "--port", "0", "--flash", "memory", "--control", "off",
                          "--busy-poll", "10001"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run
    assert "--busy-poll must be 0 to 10000 microseconds" in run.stderr

"""The private hidraw key (`fidosim run -- PROGRAM`, `serve --transport private`), tried the way its users use it: on
this machine, which has no /dev/uhid, as another, unprivileged user (uid 65534, no capabilities), with clients nobody
in the project wrote: hidapi (its hidraw backend), libfido2's tools, python-fido2's own hidraw backend, libudev's
monitor. The ioctls and read rules are checked against what the kernel's hidraw driver does."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from fidosim import FidosimServer, find_binary

HERE = Path(__file__).resolve().parent
TOOLS = HERE.parent / "private-key"
REPO = HERE.parents[1]
NOBODY = 65534
# The other user's Python: Debian's, with python-fido2 installed where that user can read it (the project's own
# interpreter may live under a home directory only its owner enters).
SYSTEM_PYTHON = "/usr/bin/python3"
OTHER_USER_LIB = REPO / ".build" / "other-user-python"


_readable: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def readable_binary():
    """The binary where every user can run it: the clone may be in a directory only its owner enters (a fresh clone
    in `mktemp -d`), and these tests run it as another user."""
    directory = tempfile.mkdtemp(prefix="fidosim-bin-")
    os.chmod(directory, 0o755)
    _readable["binary"] = readable_copy(find_binary(), directory)
    yield
    shutil.rmtree(directory, ignore_errors=True)


def binary() -> str:
    return _readable["binary"]


@pytest.fixture(scope="module")
def nobody_home():
    home = tempfile.mkdtemp(prefix="fidosim-nobody-")
    os.chmod(home, 0o755)
    os.chown(home, NOBODY, NOBODY)
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def nobody_dir():
    """A directory of the other user's, outside root's private temporary directories."""
    path = Path(tempfile.mkdtemp(prefix="fidosim-private-"))
    os.chown(path, NOBODY, NOBODY)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def other_user_python():
    """PYTHONPATH with python-fido2 for Debian's python3, readable by every user."""
    subprocess.run(["bash", str(REPO / "tools" / "e2e" / "other-user-python.sh"), str(OTHER_USER_LIB), str(REPO)],
                   check=True)
    # A copy outside the clone, which may be in a directory only its owner enters.
    directory = tempfile.mkdtemp(prefix="fidosim-other-python-")
    os.chmod(directory, 0o755)
    shutil.copytree(OTHER_USER_LIB, directory, dirs_exist_ok=True)
    subprocess.run(["chmod", "-R", "a+rX", directory], check=True)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def as_nobody(home: str, *command: str, extra_env: dict | None = None) -> list[str]:
    env = [f"HOME={home}", "PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=/tmp"]
    env += [f"{k}={v}" for k, v in (extra_env or {}).items()]
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "env", "-i", *env, *command]


def run_key(*options: str) -> list[str]:
    return [binary(), "run", "--flash", "memory", "--control", "off", "--log-level", "warning",
            *options, "--"]


def readable_copy(path: Path | str, home: str) -> str:
    target = Path(home) / Path(path).name
    shutil.copy(path, target)
    os.chmod(target, 0o755)
    return str(target)


def test_hidapi_lists_the_key_with_its_usage_page_and_reads_one_report_per_read(nobody_home):
    probe = Path(nobody_home) / "hidapi_reads"
    cflags = subprocess.run(["pkg-config", "--cflags", "--libs", "hidapi-hidraw"], capture_output=True, text=True,
                            check=True).stdout.split()
    subprocess.run(["cc", "-O1", "-o", str(probe), str(TOOLS / "hidapi_reads.c"), *cflags], check=True)
    os.chmod(probe, 0o755)
    done = subprocess.run(as_nobody(nobody_home, *run_key("--serial", "HIDAPI1"), str(probe)), capture_output=True,
                          text=True, timeout=60)
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "usage_page=f1d0 usage=01 serial=HIDAPI1 product=fidosim virtual FIDO2 key" in done.stdout
    for line in ("read65 64 nonce-ok=1", "read4096 64 nonce=2", "read4096 64 nonce=3", "read10 10 nonce=4",
                 "read-after-short 64 nonce=5", "read-timeout 0", "read-nonblocking 0", "OK"):
        assert line in done.stdout.splitlines(), line


def test_the_node_answers_hidraw_ioctls_as_the_kernel_does(nobody_home):
    script = readable_copy(TOOLS / "hidraw_ioctls.py", nobody_home)
    done = subprocess.run(as_nobody(nobody_home, *run_key("--serial", "IOCTL-1"), SYSTEM_PYTHON, script),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    descriptor = ("06d0f10901a1010920150026ff007508954081020921150026ff00750895409102c0")
    assert answers["descriptorSize"] == [0, 34]
    assert answers["descriptor"] == descriptor
    assert answers["shortDescriptor"] == descriptor[:10] and answers["shortDescriptorUntouched"]
    assert answers["descriptorTooBig"] == "EINVAL"
    assert answers["info"] == [3, 0x1209, 0xF1D0]  # BUS_USB
    assert answers["name"] == [26, "fidosim virtual FIDO2 key"] and answers["nameUntouched"]
    assert answers["phys"] == [26, "usb-0000:00:14.0-1/input0"] and answers["physUntouched"]
    assert answers["uniq"] == [8, "IOCTL-1"] and answers["uniqUntouched"]
    assert answers["nameCut"] == [4, b"fido".hex()]
    assert answers["getFeature"] == "EPIPE"  # no feature reports: the endpoint stalls
    assert answers["isatty"] is False and answers["tcgets"] == "EINVAL"
    assert answers["unknownH"] == "ENOTTY"


def test_a_reader_that_falls_behind_loses_no_report(nobody_home):
    """hidraw keeps 64 reports for a reader and drops the rest; the private node holds them back instead, so that a
    client the machine's load delays still gets a 129-report answer whole."""
    script = readable_copy(TOOLS / "slow_reader.py", nobody_home)
    done = subprocess.run(as_nobody(nobody_home, *run_key(), SYSTEM_PYTHON, script, "/dev/hidraw0", "0.5"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "whole"


def test_libfido2_tools_make_and_verify_a_credential_and_an_assertion(nobody_home):
    script = Path(nobody_home) / "libfido2.sh"
    script.write_text("""set -e
cd "$HOME"
fido2-token -L
fido2-token -I /dev/hidraw0 | grep -q 'version strings: U2F_V2, FIDO_2_0'
cdh() { head -c 32 /dev/urandom | base64; }
printf '%s\\n%s\\n%s\\n%s\\n' "$(cdh)" example.com alice "$(head -c 16 /dev/urandom | base64)" > cred.in
fido2-cred -M -i cred.in -o cred.out /dev/hidraw0 es256
fido2-cred -V -i cred.out -o cred.pub es256
printf '%s\\n%s\\n%s\\n' "$(cdh)" example.com "$(sed -n 5p cred.out)" > assert.in
fido2-assert -G -i assert.in -o assert.out /dev/hidraw0
fido2-assert -V -i assert.out cred.pub es256
echo verified
""")
    os.chmod(script, 0o755)
    done = subprocess.run(as_nobody(nobody_home, *run_key("--serial", "LIBFIDO2"), "sh", str(script)),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "/dev/hidraw0: vendor=0x1209, product=0xf1d0" in done.stdout
    assert done.stdout.strip().endswith("verified")


def test_standard_output_is_the_program_s_alone(nobody_home):
    """`out=$(fidosim run -- fido2-token -L)` holds fido2-token's line only: fidosim's start line goes to standard
    error (as `xvfb-run` and `umockdev-run` leave standard output to their program), and with the default log level
    no request's line is written anywhere; `--log-level info` brings them back, on standard error."""
    quiet = [binary(), "run", "--flash", "memory", "--control", "off", "--"]
    done = subprocess.run(as_nobody(nobody_home, *quiet, "fido2-token", "-L"), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [next(line for line in done.stdout.splitlines() if "/dev/hidraw0" in line)]
    assert done.stdout.startswith("/dev/hidraw0: vendor=0x1209, product=0xf1d0"), done.stdout
    assert "fidosim: serving a virtual key on a private hidraw node" in done.stderr
    assert " info fidosim: " not in done.stderr, done.stderr
    loud = [binary(), "run", "--flash", "memory", "--control", "off", "--log-level", "info", "--"]
    done = subprocess.run(as_nobody(nobody_home, *loud, "fido2-token", "-I", "/dev/hidraw0"), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fidosim" not in done.stdout and "version strings:" in done.stdout, done.stdout
    assert " info fidosim: [VirtualKey] getInfo -> ok" in done.stderr, done.stderr


def test_python_fido2_finds_the_key_through_its_hidraw_backend(nobody_home, other_user_python):
    script = readable_copy(TOOLS / "ceremony.py", nobody_home)
    done = subprocess.run(as_nobody(nobody_home, *run_key("--serial", "PYFIDO2"), SYSTEM_PYTHON, script, "PYFIDO2",
                                    extra_env={"PYTHONPATH": other_user_python}),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "device /dev/hidraw0 PYFIDO2" in done.stdout and "verified" in done.stdout


def test_the_program_s_status_is_the_exit_status_and_the_testbed_goes(nobody_home, nobody_dir):
    ready = nobody_dir / "ready.json"
    done = subprocess.run(as_nobody(nobody_home, *run_key("--ready-file", str(ready)), "sh", "-c",
                                    'test -c /dev/hidraw0 && test -d "$UMOCKDEV_DIR" && exit 7'),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 7, done.stderr
    record = json.loads(ready.read_text())
    assert record["transport"] == "private" and record["devnode"] == "/dev/hidraw0"
    assert not os.path.exists(record["umockdevDir"]), "the testbed directory is removed at exit"
    missing = subprocess.run(as_nobody(nobody_home, *run_key(), "no-such-program-fidosim"), capture_output=True,
                             text=True, timeout=60)
    assert missing.returncode == 127 and "no-such-program-fidosim: No such file or directory" in missing.stderr


def test_signals_go_to_the_program_and_its_end_stops_the_key(nobody_home, nobody_dir):
    ready = nobody_dir / "ready.json"
    process = subprocess.Popen(as_nobody(nobody_home, *run_key("--ready-file", str(ready)), "sleep", "60"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    record = json.loads(ready.read_text())
    testbed = Path(record["umockdevDir"])
    assert testbed.is_dir() and (testbed.stat().st_mode & 0o777) == 0o700, "the testbed is private"
    fidosim_pid = record["pid"]
    os.kill(fidosim_pid, signal.SIGTERM)
    out, err = process.communicate(timeout=20)
    assert process.returncode == 128 + signal.SIGTERM, err  # sleep died of the forwarded SIGTERM
    assert not testbed.exists()


def test_a_stale_testbed_of_a_killed_run_is_removed_at_the_next_start(nobody_home):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = Path(tempfile.mkdtemp(prefix="umockdev.", dir="/tmp"))
    (stale / "fidosim.pid").write_text(f"{dead.pid}\n")
    (stale / "sys").mkdir()
    live = Path(tempfile.mkdtemp(prefix="umockdev.", dir="/tmp"))
    (live / "fidosim.pid").write_text(f"{os.getpid()}\n")
    foreign = Path(tempfile.mkdtemp(prefix="umockdev.", dir="/tmp"))  # not fidosim's: no owner file
    try:
        for path in (stale, stale / "sys", stale / "fidosim.pid", live, live / "fidosim.pid", foreign):
            os.chown(path, NOBODY, NOBODY)
        done = subprocess.run(as_nobody(nobody_home, *run_key(), "true"), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert not stale.exists(), "a killed run's testbed is removed"
        assert live.exists() and foreign.exists(), "a live run's testbed and others' directories stay"
    finally:
        for path in (stale, live, foreign):
            shutil.rmtree(path, ignore_errors=True)


def test_two_trees_see_only_their_own_keys_and_nothing_outside_sees_them(nobody_home, nobody_dir):
    lister = nobody_dir / "list.sh"
    lister.write_text('for f in /sys/class/hidraw/*/device/uevent; do grep HID_UNIQ "$f"; done; sleep 2\n'
                      'for f in /sys/class/hidraw/*/device/uevent; do grep HID_UNIQ "$f"; done\n')
    first = subprocess.Popen(as_nobody(nobody_home, *run_key("--serial", "TREE-A"), "sh", str(lister)),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen(as_nobody(nobody_home, *run_key("--serial", "TREE-B", "--keys", "2"), "sh",
                                        str(lister)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    outside = subprocess.run(as_nobody(nobody_home, "sh", "-c", "cat /sys/class/hidraw/*/device/uevent 2>/dev/null; "
                                       "ls /dev/hidraw* 2>/dev/null; true"), capture_output=True, text=True)
    out_a, err_a = first.communicate(timeout=30)
    out_b, err_b = second.communicate(timeout=30)
    assert first.returncode == 0 and second.returncode == 0, err_a + err_b
    seen_a = [line for line in out_a.splitlines() if line.startswith("HID_UNIQ=")]
    seen_b = [line for line in out_b.splitlines() if line.startswith("HID_UNIQ=")]
    assert seen_a == ["HID_UNIQ=TREE-A"] * 2
    assert sorted(seen_b) == sorted(["HID_UNIQ=TREE-B", "HID_UNIQ=TREE-B-2"] * 2)
    assert "TREE-" not in outside.stdout


def test_a_power_cycle_removes_the_node_and_plugs_a_new_one_with_uevents(nobody_home, nobody_dir):
    monitor = readable_copy(TOOLS / "uevent_monitor.py", nobody_home)
    socket_path = nobody_dir / "key.sock"
    script = nobody_dir / "hotplug.sh"
    script.write_text(f"""set -e
{SYSTEM_PYTHON} {monitor} 4 > {nobody_dir}/events &
sleep 1
fido2-token -L
{binary()} ctl --control {socket_path} power-cycle
sleep 0.5
fido2-token -L
wait
cat {nobody_dir}/events
""")
    command = [binary(), "run", "--flash", "memory", "--control", str(socket_path), "--log-level",
               "warning", "--", "sh", str(script)]
    done = subprocess.run(as_nobody(nobody_home, *command), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "/dev/hidraw0: vendor=0x1209, product=0xf1d0 (fidosim fidosim virtual FIDO2 key)" in lines
    # The kernel gives the replugged key a new HID device (next sequence number); its node is the next free minor.
    assert "/dev/hidraw1: vendor=0x1209, product=0xf1d0 (fidosim fidosim virtual FIDO2 key)" in lines
    events = [line.split()[1:] for line in lines if line.startswith("EVENT")]
    removed = [path for action, path in events if action == "remove"]
    added = [path for action, path in events if action == "add"]
    assert removed[0].endswith("/0003:1209:F1D0.0001/hidraw/hidraw0") and removed[-1].endswith("/usb1/1-1")
    assert added[0].endswith("/usb1/1-1") and added[-1].endswith("/0003:1209:F1D0.0002/hidraw/hidraw1")


def test_serve_writes_an_environment_file_that_other_programs_source(nobody_home, nobody_dir):
    env_file = nobody_dir / "key.env"
    serve = FidosimServer(binary=binary(), transport="private", control="off", serial="ENVFILE", presence=None,
                          presence_delay_ms=None, notify=None, stdout=subprocess.PIPE, user=NOBODY, group=NOBODY,
                          env={"HOME": nobody_home, "PATH": "/usr/local/bin:/usr/bin:/bin", "TMPDIR": "/tmp"},
                          args=("--env-file", str(env_file)), startup_timeout=30).start()
    try:
        record = serve.record
        assert record["envFile"] == str(env_file) and record["transport"] == "private"
        assert (env_file.stat().st_mode & 0o777) == 0o600
        assert "presence: approve" in serve.process.stdout.readline()
        done = subprocess.run(as_nobody(nobody_home, "sh", "-c", f". {env_file} && fido2-token -L"),
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("/dev/hidraw0: vendor=0x1209, product=0xf1d0")
        without = subprocess.run(as_nobody(nobody_home, "fido2-token", "-L"), capture_output=True, text=True)
        assert "0xf1d0" not in without.stdout
    finally:
        code = serve.close()
    assert code == 0


def test_without_umockdev_the_error_names_the_packages(nobody_home, tmp_path):
    """A machine without umockdev's library: fidosim starts, and `run` says what to install (the library is looked
    up at run time; an empty library path stands in for its absence)."""
    fake = tmp_path / "lib"
    fake.mkdir()
    (fake / "libumockdev.so.0").write_text("not a library")
    done = subprocess.run([binary(), "run", "--flash", "memory", "--control", "off", "--", "true"],
                          capture_output=True, text=True, timeout=30, env={**os.environ, "LD_LIBRARY_PATH": str(fake)})
    assert done.returncode != 0
    assert "install umockdev and libumockdev0" in done.stderr
    assert subprocess.run([binary(), "--version"], env={**os.environ, "LD_LIBRARY_PATH": str(fake)},
                          capture_output=True).returncode == 0


def test_another_user_given_the_environment_sees_no_key(nobody_home, tmp_path):
    """The owner's tree is the owner's: its directory is 0700, so another local user who learns (or is handed)
    LD_PRELOAD and UMOCKDEV_DIR finds no key, no node and no sysfs device, and cannot drive the key."""
    serve = FidosimServer(binary=binary(), transport="private", control="off", serial="OWNERS", presence=None,
                          presence_delay_ms=None, notify=None, startup_timeout=30).start()
    try:
        tree = serve.record["umockdevDir"]
        environment = {"LD_PRELOAD": "libumockdev-preload.so.0", "UMOCKDEV_DIR": tree}
        owner = subprocess.run(["fido2-token", "-L"], env={**os.environ, **environment}, capture_output=True,
                               text=True, timeout=30)
        assert owner.stdout.startswith("/dev/hidraw0: vendor=0x1209"), "the owner's programs see it"
        other = subprocess.run(as_nobody(nobody_home, "sh", "-c", "fido2-token -L; ls /dev/hidraw* "
                                         "/sys/class/hidraw 2>&1; cat /dev/hidraw0 2>&1; true",
                                         extra_env=environment), capture_output=True, text=True, timeout=30)
        assert "0xf1d0" not in other.stdout and "OWNERS" not in other.stdout
        assert "/dev/hidraw0: vendor" not in other.stdout
        assert "No such file or directory" in other.stdout or "Permission denied" in other.stdout, other.stdout
    finally:
        serve.close()


def test_the_ready_and_environment_files_never_go_into_a_folder_another_user_controls(nobody_dir, tmp_path):
    """A key's ready file and environment file in a folder another user controls (a rig's), with links that user
    planted at the files: serve refuses the folder and says so, and nothing is written there or through a link
    (before: links were replaced, but the env file, once written, could be swapped for one with the other user's
    LD_PRELOAD). In a folder of its own, through a path with a link in it, it refuses too."""
    victim = Path(tempfile.mkdtemp(prefix="fidosim-victim-")) / "owned-by-root"
    victim.write_text("keep\n")
    ready, environment = nobody_dir / "ready.json", nobody_dir / "key.env"
    for link in (ready, environment):
        subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "ln", "-s",
                        str(victim), str(link)], check=True)
    try:
        for files in (["--env-file", str(environment)], ["--env-file", str(tmp_path / "key.env"), "--ready-file",
                                                          str(ready)]):
            done = subprocess.run([binary(), "serve", "--transport", "private", "--flash", "memory",
                                   "--control", "off", *files], capture_output=True, text=True, timeout=30)
            assert done.returncode != 0, done.stderr
            assert f"{nobody_dir} is another user's" in done.stderr, done.stderr
            assert victim.read_text() == "keep\n" and ready.is_symlink() and environment.is_symlink()
        # A link in the path, in a folder of root's: refused as well.
        (tmp_path / "real").mkdir()
        (tmp_path / "linked").symlink_to(tmp_path / "real")
        done = subprocess.run([binary(), "serve", "--transport", "private", "--flash", "memory", "--control", "off",
                               "--env-file", str(tmp_path / "linked" / "key.env")], capture_output=True, text=True,
                              timeout=30)
        assert done.returncode != 0 and "is a link or not a folder" in done.stderr, done.stderr
        assert not (tmp_path / "real" / "key.env").exists()
    finally:
        shutil.rmtree(victim.parent, ignore_errors=True)


def test_a_prompt_in_run_is_answered_through_the_control_socket_not_the_terminal(nobody_home, nobody_dir):
    """`fidosim run --presence prompt`: the terminal is the program's (what it reads is not taken as an answer);
    the touch comes through `ctl touch`, as a test rig gives it."""
    socket_path = nobody_dir / "key.sock"
    script = nobody_dir / "prompted.sh"
    script.write_text(f"""set -e
cd {nobody_dir}
printf '%s\\n%s\\n%s\\n%s\\n' "$(head -c 32 /dev/urandom | base64)" example.com alice \\
    "$(head -c 16 /dev/urandom | base64)" > cred.in
{binary()} ctl --control {socket_path} events --json --timeout 30 > events.json &
sleep 0.5
fido2-cred -M -i cred.in -o cred.out /dev/hidraw0 es256 &
made=$!
until grep -q '"event":"prompt"' events.json; do sleep 0.05; done
grep '"event":"prompt"' events.json > prompt.json
read -r typed   # the program reads its own terminal: the key takes nothing from it
{binary()} ctl --control {socket_path} touch
wait $made
cat prompt.json
echo "typed: $typed"
""")
    command = [binary(), "run", "--flash", "memory", "--control", str(socket_path), "--presence",
               "prompt", "--notify", "off", "--log-level", "warning", "--", "sh", str(script)]
    done = subprocess.run(as_nobody(nobody_home, *command), input="y\n", capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "presence: prompt" in done.stderr, "fidosim's start line, on standard error"
    assert "typed: y" in done.stdout, "the program read its terminal"
    assert '"makeCredential"' in done.stdout and (nobody_dir / "cred.out").exists()

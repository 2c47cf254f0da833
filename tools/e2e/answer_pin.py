#!/usr/bin/env python3
"""Run a command on a pseudo-terminal and type PIN at every PIN prompt.

libfido2's tools and ssh-keygen read the PIN from the terminal (readpassphrase), not from stdin, so a
script cannot pipe it in. Usage: answer_pin.py PIN command [args...]; the command's output is copied to
stdout and its exit status is returned. A prompt is a line that mentions "PIN" and ends in ": " (or, as
systemd's ask-password prompts do, in "(press TAB for no echo)"), colours aside.
"""

import os
import pty
import re
import select
import sys
import termios
import time


def wait_for_no_echo(fd: int) -> None:
    """Waits (at most 2 s) until the program has turned the terminal's echo off to read the PIN: some print the
    prompt first and then change the terminal with TCSAFLUSH, which throws away anything typed before."""
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            if not termios.tcgetattr(fd)[3] & termios.ECHO:
                return
        except termios.error:
            return
        time.sleep(0.01)


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    pin = sys.argv[1].encode()
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(sys.argv[2], sys.argv[2:])
    pending = b""
    answered = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        pending = (pending + chunk)[-512:]
        # The last line without its colours (systemd's prompts are coloured and end in a hint about echo).
        last = re.sub(rb"\x1b\[[0-9;]*m", b"", pending.split(b"\n")[-1]).rstrip()
        if b"PIN" in last and (last.endswith(b":") or last.endswith(b"(press TAB for no echo)")):
            wait_for_no_echo(fd)
            os.write(fd, pin + b"\n")
            answered += 1
            pending = b""
    _, status = os.waitpid(pid, 0)
    print(f"\n[answer_pin: {answered} PIN prompt(s) answered]", file=sys.stderr)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())

"""How long each server and long-running command takes to end after Ctrl-C (SIGINT), optionally beside busy loops.

Each command is started on a robot and rendezvous of its own, waited for until it serves, sent SIGINT, and timed until
its process has ended; the table gives the median and the worst of ``--runs`` runs. The README promises 1 s.

    python bench/ctrl_c.py --runs 3 --busy 4
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

COMMANDS: dict[str, tuple[list[str], str]] = {
    "run heartbeat": (["run", "heartbeat"], r"started \(pid"),
    "up heartbeat": (["up", "heartbeat"], r"profile heartbeat is up"),
    "up mission": (["up", "mission"], r"profile mission is up"),
    "xmlserver": (["xmlserver", "--port", "0"], r"started \(pid"),
    "player": (["player", "--port", "0"], r"started \(pid"),
    "netmotion": (["netmotion", "--port", "0"], r"netmotion started \(pid"),
    "web": (["web", "--port", "0"], r"started \(pid"),
    "foxglove": (["foxglove", "--port", "0"], r"started \(pid"),
    "sick-emulate": (["sick-emulate", "--port", "0"], r"Ctrl-C stops it"),
    "p2os-emulate": (["p2os-emulate", "--port", "0"], r"Ctrl-C stops it"),
    "gps-emulate": (["gps-emulate", "--port", "0"], r"Ctrl-C stops it"),
    "dmu-emulate": (["dmu-emulate", "--port", "0"], r"Ctrl-C stops it"),
    "record": (["record", "-o", "{tmp}/run.mcap"], r"received SIGINT|^$"),
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_time(args: list[str]) -> tuple[float, int]:
    """Start ``pluto -v ARGS``, wait until it serves, SIGINT it: (seconds until it ended, its exit status)."""
    tmp = tempfile.mkdtemp()
    env = {
        **os.environ,
        "PLUTO_ROBOT": f"bench-{uuid.uuid4().hex[:6]}",
        "PLUTO_RENDEZVOUS": f"tcp/127.0.0.1:{_free_port()}",
        "PLUTO_RUNTIME_DIR": tmp,
    }
    name = " ".join(args[:2])
    argv, ready = COMMANDS[name] if name in COMMANDS else COMMANDS[args[0]]
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "-v", *[a.format(tmp=tmp) for a in argv]],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    if args[0] == "record":
        while not os.path.exists(os.path.join(tmp, "run.mcap")) and process.poll() is None:
            time.sleep(0.05)
    else:
        for line in process.stdout:
            if re.search(ready, line):
                break
    time.sleep(1.0)  # serving for a moment
    began = time.monotonic()
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    return time.monotonic() - began, process.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0, help="busy loops (`yes`) beside the commands")
    parser.add_argument("only", nargs="*", help="commands to time (default: all)")
    options = parser.parse_args()
    loops = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(options.busy)]
    try:
        print(f"{'command':16s} {'median':>8s} {'worst':>8s}  (s from SIGINT to exit, {options.busy} busy loops)")
        for name in options.only or list(COMMANDS):
            runs = [stop_time(name.split()) for _ in range(options.runs)]
            times = [t for t, _ in runs]
            codes = sorted({code for _, code in runs})
            print(f"{name:16s} {statistics.median(times):8.2f} {max(times):8.2f}  exit {codes}", flush=True)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


if __name__ == "__main__":
    main()

"""A probe of a secure bus, for test_secure_namespaces.py (run inside a network namespace with the test's environment).

``watch-commands``: collect the commands that arrive on ``motion/command`` and serve them as ``mom/command-watch``
(a service any enrolled machine may call, a viewer too); print ``ready``, then serve until killed.
``raw-put``: with a plain Zenoh session on this process's bus settings (as a program that does not use Pluto's bus,
so nothing refuses it before the router), wait until ``mom/command-watch`` answers (the session then knows the
watcher's subscriber too), put a command on ``motion/command``, then call ``mom/command-watch`` and print what it
has seen as JSON; with ``--until-seen``, call it again until the command is among them (at most 20 s).
``no-cert``: open a session to the router trusting the CA in ``PLUTO_TLS_CA`` but showing no certificate.
Each step waits at most 20 s; a failure exits with status 1 and says what went wrong (3: the session could not be
opened at all).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import msgspec
import zenoh

from pluto import msgs
from pluto.bus import Bus, bus_config
from pluto.bus.config import zenoh_config_json

TIMEOUT = 20.0
WATCH = "mom/command-watch"
NOT_OPENED = 3
"""The exit status of ``raw-put`` when the session cannot be opened (the router refused it)."""


def watch_commands() -> int:
    seen: list[list[float]] = []
    lock = threading.Lock()

    def on_command(command: msgs.ActuatorState) -> None:
        with lock:
            seen.append(list(command.velocity))

    def report(_request: Any) -> list[list[float]]:
        with lock:
            return list(seen)

    with Bus() as bus:
        bus.create_subscription("motion/command", on_command)
        bus.create_service(WATCH, report)
        print("ready", flush=True)
        threading.Event().wait()  # until the test kills it
    return 0


def raw_put(speed: float, until_seen: bool) -> int:
    cfg = bus_config()
    conf = zenoh.Config()
    for path, value in zenoh_config_json(cfg).items():
        conf.insert_json5(path, msgspec.json.encode(value).decode())
    watch = f"pluto/{cfg.robot}/@srv/{WATCH}"
    try:
        session = zenoh.open(conf)
    except zenoh.ZError as err:
        print(f"cannot open: {err}", file=sys.stderr)
        return NOT_OPENED
    with session:
        # A session that has just joined learns of the others' subscribers and services from the router a moment
        # later, and sends nothing to what it does not know of: first wait until the watcher answers.
        deadline = time.monotonic() + TIMEOUT
        while not any(reply.ok is not None for reply in session.get(watch, timeout=1.0)):
            if time.monotonic() > deadline:
                print(f"{WATCH} never answered", file=sys.stderr)
                return 1
            time.sleep(0.1)
        session.put(f"pluto/{cfg.robot}/motion/command", msgs.encode(msgs.ActuatorState(velocity=[speed, 0.0])))
        while True:
            seen = _ask(session, watch)
            if seen is None:
                return 1
            if not until_seen or [speed, 0.0] in seen or time.monotonic() > deadline + TIMEOUT:
                print(msgspec.json.encode(seen).decode(), flush=True)
                return 0
            time.sleep(0.05)


def _ask(session: zenoh.Session, watch: str) -> list[list[float]] | None:
    """The commands the watcher has seen, or None (said on stderr) if it does not answer."""
    for reply in session.get(watch, timeout=TIMEOUT):
        if reply.ok is not None:
            return msgspec.msgpack.decode(reply.ok.payload.to_bytes(), type=list[list[float]])
        if reply.err is not None:
            print(f"error from {WATCH}: {reply.err.payload.to_string()}", file=sys.stderr)
            return None
    print(f"no reply from {WATCH}", file=sys.stderr)
    return None


def no_cert() -> int:
    """Open a session to the router in ``PLUTO_CONNECT`` trusting ``PLUTO_TLS_CA`` but showing no certificate."""
    conf = zenoh.Config()
    conf.insert_json5("mode", '"client"')
    conf.insert_json5("connect/endpoints", msgspec.json.encode([os.environ["PLUTO_CONNECT"]]).decode())
    conf.insert_json5("connect/timeout_ms", "3000")
    conf.insert_json5("connect/exit_on_failure", "true")
    conf.insert_json5(
        "transport/link/tls/root_ca_certificate", msgspec.json.encode(os.environ["PLUTO_TLS_CA"]).decode()
    )
    try:
        session = zenoh.open(conf)
    except zenoh.ZError as err:
        print(f"cannot open: {err}", file=sys.stderr)
        return NOT_OPENED
    session.close()  # type: ignore[no-untyped-call]
    print("opened", flush=True)
    return 0


def main(argv: list[str]) -> int:
    if argv == ["no-cert"]:
        return no_cert()
    if argv == ["watch-commands"]:
        return watch_commands()
    if len(argv) in (2, 3) and argv[0] == "raw-put" and argv[2:] in ([], ["--until-seen"]):
        return raw_put(float(argv[1]), until_seen=argv[2:] == ["--until-seen"])
    print(f"usage: {sys.argv[0]} watch-commands | raw-put SPEED [--until-seen] | no-cert", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

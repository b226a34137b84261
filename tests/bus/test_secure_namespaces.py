"""A secure bus across machines for real: ``pluto router --secure`` in one network namespace, machines in two others.

The namespaces are those of test_namespaces.py (``r`` holds the router; ``a`` and ``b`` each reach only ``r``, on a
subnet of their own). A CA made for the test enrols the router (named by both its addresses), a robot machine in
``a`` and, in ``b``, a second robot machine and a viewer laptop; ``b`` also plays machines that are not enrolled.
Every process joins as the README says: ``PLUTO_CONNECT=tls/<router>:7447`` and ``PLUTO_TLS=<its folder>``.

Checked across the router: an enrolled robot machine's data reaches another one (a late joiner's read, a service
call, ``pluto mom``, a command); a process with no certificate, with a plain ``tcp/`` link, or with a certificate of
another CA cannot open the bus at all (so it can neither read nor write), each told in one line; an enrolled viewer
reads an interface and lists the modules, but ``pluto pub`` of a command is refused on its machine, and a command
put by a program that bypasses Pluto's bus is dropped by the router: the command reader in ``a`` never sees it,
while the same put from the robot machine in ``b``, sent after it, does arrive.

Needs root and ``ip`` (iproute2); skipped with the reason otherwise. The namespaces are deleted however it ends.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from pluto.bus import certs
from tests.bus.netns import PROBE, ROUTER_PORT, SUBNETS, TIMEOUT, Net
from tests.bus.secure_probe import NOT_OPENED
from tests.bus.test_two_processes import Peer

SECURE_PROBE = Path(__file__).with_name("secure_probe.py")


class SecureNet(Net):
    """The namespaces of :class:`Net`, with a CA, and processes that join as the machine :attr:`machine` names."""

    attempt_timeout = TIMEOUT * 2

    def __init__(self, tmp_path: Path, robot: str) -> None:
        super().__init__(tmp_path, robot)
        self.ca_dir = tmp_path / "ca"
        certs.init_ca(self.ca_dir, name="atrv")
        hosts = [f"{subnet}.1" for subnet in SUBNETS.values()]
        self.router_dir = certs.add_machine(self.ca_dir, "router", "router", hosts=hosts)
        self.folders = {
            "robot1": certs.add_machine(self.ca_dir, "robot1", "robot"),
            "robot2": certs.add_machine(self.ca_dir, "robot2", "robot"),
            "laptop": certs.add_machine(self.ca_dir, "laptop", "viewer"),
        }
        # Another robot's CA, with a machine of the same name as ours: only the signatures tell them apart.
        stranger = certs.add_machine(certs.init_ca(tmp_path / "other-ca", name="atrv").directory, "robot1")
        self.folders["stranger"] = stranger
        self.machine: dict[str, str] = {"a": "robot1", "b": "robot2"}
        """The machine each side's processes join as; "" for none (no certificate)."""
        self.plain = False
        """Processes join over a plain tcp/ link instead (no TLS)."""
        self.ca_override: Path | None = None
        """A CA certificate to trust instead of the machine folder's own."""

    def env(self, side: str) -> dict[str, str]:
        env = super().env(side)
        if side == "r":
            return env
        address = f"{SUBNETS[side]}.1:{ROUTER_PORT}"
        env["PLUTO_CONNECT"] = f"tcp/{address}" if self.plain else f"tls/{address}"
        name = self.machine[side]
        if name and not self.plain:
            env["PLUTO_TLS"] = str(self.folders[name])
        if self.ca_override is not None:
            env["PLUTO_TLS_CA"] = str(self.ca_override)
        return env

    def start_router(self) -> Peer:
        router = self.start(
            "r", "-m", "pluto", "router", "--secure", "--tls", str(self.router_dir), "--listen", "tls/0.0.0.0:7447"
        )
        line = router.lines.get(timeout=TIMEOUT)
        assert line is not None and line.startswith("router listening"), router.stderr()
        assert "robots: robot1, robot2; viewers: laptop" in line, line
        return router

    def start_watcher(self) -> Peer:
        """The command reader on the robot machine in ``a`` (secure_probe.py watch-commands)."""
        watcher = self.start("a", str(SECURE_PROBE), "watch-commands")
        watcher.wait_for_line("ready", TIMEOUT)
        return watcher

    def commands_seen(self) -> list[list[float]]:
        """What the watcher in ``a`` has seen, asked by the robot machine in ``b``."""
        self.machine["b"] = "robot2"
        seen: list[list[float]] = msgspec.json.decode(self.run("b", str(PROBE), "call", "mom/command-watch"))
        return seen


@pytest.fixture
def net(tmp_path: Path, bus_env: dict[str, str]) -> Iterator[SecureNet]:
    yield from SecureNet.running(tmp_path, bus_env["PLUTO_ROBOT"])


def _one_line_error(done: subprocess.CompletedProcess[str], *expected: str) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    error = done.stderr.strip()
    assert "\n" not in error and "Traceback" not in error, error
    for text in expected:
        assert text in error, error
    return error


def test_an_enrolled_robot_machine_and_the_router_exchange_data(net: SecureNet) -> None:
    net.start_router()
    net.start_watcher()
    net.start("a", "-m", "pluto", "run", "heartbeat", "-p", "rate_hz=20")

    # The robot machine in b reads what the one in a writes (a late joiner's read), calls its module's service and
    # lists its modules.
    beat = msgspec.json.decode(net.run("b", str(PROBE), "read", "Heartbeat"))
    assert beat["source"] == "heartbeat" and beat["seq"] >= 1
    assert msgspec.json.decode(net.run("b", str(PROBE), "call", "mom/heartbeat"))["name"] == "heartbeat"
    table = net.run("b", "-m", "pluto", "mom")
    assert any(line.split()[:1] == ["heartbeat"] for line in table.splitlines()), table
    # And commands the robot in a.
    assert msgspec.json.decode(net.run("b", str(SECURE_PROBE), "raw-put", "0.5", "--until-seen")) == [[0.5, 0.0]]


def test_an_unenrolled_process_can_neither_read_nor_write(net: SecureNet) -> None:
    net.start_router()
    net.start_watcher()
    net.start("a", "-m", "pluto", "run", "heartbeat", "-p", "rate_hz=20")
    net.machine["b"] = "robot2"
    net.run("b", str(PROBE), "read", "Heartbeat")  # the router routes for the enrolled

    # A plain tcp/ link to the router's port: no TLS, no bus.
    net.plain = True
    _one_line_error(net.attempt("b", "-m", "pluto", "mom"), "cannot open the bus at tcp/")
    net.plain = False

    # No certificate at all: the router wants one.
    net.machine["b"] = ""
    net.ca_override = net.folders["robot2"] / "ca.pem"
    no_cert = net.attempt("b", str(SECURE_PROBE), "no-cert")
    assert no_cert.returncode == NOT_OPENED, no_cert

    # A certificate of another CA, trusting ours (the router's certificate is public): refused by the router. Pluto
    # itself says so before it tries.
    net.machine["b"] = "stranger"
    _one_line_error(net.attempt("b", "-m", "pluto", "mom"), "was not signed by the CA in")
    stranger = net.attempt("b", str(SECURE_PROBE), "raw-put", "0.7")
    assert stranger.returncode == NOT_OPENED, stranger
    # The same, trusting its own CA: it refuses the router first.
    net.ca_override = None
    _one_line_error(net.attempt("b", "-m", "pluto", "mom"), "not from this machine's CA")
    _one_line_error(net.attempt("b", "-m", "pluto", "echo", "Heartbeat", "-n", "1"), "not from this machine's CA")

    # None of them got a command through.
    net.ca_override = None
    assert net.commands_seen() == []


def test_an_enrolled_viewer_reads_an_interface_and_cannot_command(net: SecureNet) -> None:
    net.start_router()
    net.start_watcher()
    net.start("a", "-m", "pluto", "run", "heartbeat", "-p", "rate_hz=20")

    net.machine["b"] = "laptop"
    beat = msgspec.json.decode(net.run("b", str(PROBE), "read", "Heartbeat"))
    assert beat["source"] == "heartbeat"
    table = net.run("b", "-m", "pluto", "mom")
    assert any(line.split()[:1] == ["heartbeat"] for line in table.splitlines()), table

    # Pluto on the viewer says at once that it cannot command.
    refused = net.attempt("b", "-m", "pluto", "pub", "motion/command", '{"velocity": [0.4, 0.0]}', "--once")
    _one_line_error(refused, "viewer (laptop)")
    # A program that bypasses Pluto's bus puts the command anyway: the router drops it.
    assert msgspec.json.decode(net.run("b", str(SECURE_PROBE), "raw-put", "0.7")) == []
    # The same put from the robot machine in b, a process started after that one ended, arrives; the viewer's, had
    # the router passed it on, would have arrived before it.
    net.machine["b"] = "robot2"
    assert msgspec.json.decode(net.run("b", str(SECURE_PROBE), "raw-put", "0.5", "--until-seen")) == [[0.5, 0.0]]

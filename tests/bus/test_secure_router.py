"""``pluto router --secure`` on the loopback: mutual TLS, and each rule of the access control checked on the wire.

A CA is made with a router (``127.0.0.1``), a robot machine and a viewer; the router runs as ``pluto router
--secure`` in a process of its own. Buses join it as the README says (``connect`` a ``tls/`` endpoint, ``tls`` the
machine's folder); where a rule must hold against a process that does not use Pluto's bus (which refuses a viewer's
command itself), a raw Zenoh session with the same files plays that process.

A message the router drops leaves nothing to wait for, so each such check waits for a message that is allowed
and was sent after it: the same message from a robot machine (its arrival also shows that the check is not blind),
or, for declarations, a query through the same link (Zenoh sends a session's declarations before what follows them
on its link, which Pluto's bus relies on too). Once that has arrived, the dropped message would have arrived before.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import zenoh

from pluto import msgs
from pluto.bus import Bus, bus_config
from pluto.bus import certs as ca
from pluto.bus.access import ROBOT_KEYS, access_control, viewer_may_call
from pluto.bus.config import BusConfig, zenoh_config_json
from pluto.errors import BusError
from tests.bus.test_two_processes import Peer
from tests.helpers import free_tcp_port

TIMEOUT = 20.0


class Secure:
    """A CA, its machines' folders, and a secure router listening on the loopback."""

    def __init__(self, tmp_path: Path, robot: str) -> None:
        self.robot = robot
        self.ca_dir = tmp_path / "ca"
        ca.init_ca(self.ca_dir, name="test")
        self.router_dir = ca.add_machine(self.ca_dir, "router", "router", hosts=["127.0.0.1"])
        self.robot_dir = ca.add_machine(self.ca_dir, "robot1", "robot")
        self.viewer_dir = ca.add_machine(self.ca_dir, "laptop", "viewer")
        self.revoked_dir = ca.add_machine(self.ca_dir, "stolen", "robot")
        ca.CertificateAuthority(self.ca_dir).revoke("stolen")
        self.endpoint = f"tls/127.0.0.1:{free_tcp_port()}"
        self.tmp_path = tmp_path
        self.router: Peer | None = None
        self.sessions: list[zenoh.Session] = []
        self.buses: list[Bus] = []

    def start(self) -> None:
        stderr_path = self.tmp_path / "router.err"
        with stderr_path.open("w") as stderr:
            command = ["-m", "pluto", "router", "--secure", "--tls", str(self.router_dir), "--listen", self.endpoint]
            proc = subprocess.Popen(
                [sys.executable, *command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        self.router = Peer(proc, stderr_path)
        line = self.router.lines.get(timeout=TIMEOUT)
        assert line is not None and line.startswith("router listening"), self.router.stderr()
        assert "robots: robot1; viewers: laptop" in line

    def config(self, folder: Path) -> BusConfig:
        return bus_config({"robot": self.robot, "connect": [self.endpoint], "tls": str(folder)}, env={})

    def bus(self, folder: Path) -> Bus:
        bus = Bus(self.config(folder))
        self.buses.append(bus)
        return bus

    def raw(self, folder: Path) -> zenoh.Session:
        """A plain Zenoh session with a machine's files: a process that does not go through Pluto's checks."""
        conf = zenoh.Config()
        for path, value in zenoh_config_json(self.config(folder)).items():
            conf.insert_json5(path, msgspec.json.encode(value).decode())
        session = zenoh.open(conf)
        self.sessions.append(session)
        return session

    def key(self, suffix: str) -> str:
        return f"pluto/{self.robot}/{suffix}"

    def close(self) -> None:
        for bus in self.buses:
            bus.close()
        for session in self.sessions:
            session.close()  # type: ignore[no-untyped-call]
        if self.router is not None:
            self.router.stop()


@pytest.fixture
def secure(tmp_path: Path, bus_env: dict[str, str]) -> Iterator[Secure]:
    net = Secure(tmp_path, bus_env["PLUTO_ROBOT"])
    try:
        net.start()
        yield net
    finally:
        net.close()


class Arrivals:
    """What a robot machine receives, in the order it arrives: puts on a key and queries of a probe key."""

    def __init__(self, session: zenoh.Session, secure: Secure, watched: str) -> None:
        self.seen: list[str] = []
        self.changed = threading.Condition()
        self._subscriber = session.declare_subscriber(secure.key(watched), self._on_sample)
        self._probe = session.declare_queryable(secure.key("test/probe"), self._on_query)

    def _note(self, what: str) -> None:
        with self.changed:
            self.seen.append(what)
            self.changed.notify_all()

    def note_call(self, calls: list[str], query: zenoh.Query) -> None:
        """A call of a service that never answers: who called (its payload)."""
        with self.changed:
            calls.append(query.payload.to_string() if query.payload else "")
            self.changed.notify_all()

    def _on_sample(self, sample: zenoh.Sample) -> None:
        self._note(f"put {sample.payload.to_string()}")

    def _on_query(self, query: zenoh.Query) -> None:
        self._note(f"query {query.payload.to_string() if query.payload else ''}")
        query.reply(query.key_expr, b"probe")

    def close(self) -> None:
        self._subscriber.undeclare()  # type: ignore[no-untyped-call]
        self._probe.undeclare()  # type: ignore[no-untyped-call]


def _probe(session: zenoh.Session, secure: Secure, tag: str) -> None:
    """An allowed round trip through the router to the robot's probe (see the module docstring)."""
    replies = list(session.get(secure.key("test/probe"), payload=tag.encode(), timeout=TIMEOUT))
    assert [r.ok.payload.to_string() for r in replies if r.ok is not None] == ["probe"], replies


def _publisher_matched(session: zenoh.Session, key: str) -> zenoh.Publisher:
    """A publisher of ``key`` once the session knows a subscriber of it: a session sends a value only to the
    subscribers it knows of, and a session that has just joined learns of them from the router a moment later."""
    publisher = session.declare_publisher(key)
    matched = threading.Event()
    listener = publisher.declare_matching_listener(lambda status: matched.set() if status.matching else None)
    if not publisher.matching_status.matching:
        assert matched.wait(TIMEOUT), f"no subscriber of {key} known to the session"
    listener.undeclare()  # type: ignore[no-untyped-call]
    return publisher


def _robot_ready(robot: zenoh.Session, viewer: zenoh.Session, secure: Secure) -> None:
    """Wait until the robot's probe is known to the router (a viewer's probe is answered)."""
    deadline = TIMEOUT
    for _ in range(int(deadline / 0.5)):
        replies = list(viewer.get(secure.key("test/probe"), payload=b"ready", timeout=0.5))
        if any(r.ok is not None for r in replies):
            return
    raise AssertionError("the robot's probe never became reachable through the router")


# -- the rules -----------------------------------------------------------------------------------------------------


def test_robot_machines_read_write_serve_and_announce_through_the_router(secure: Secure) -> None:
    one, two = secure.bus(secure.robot_dir), secure.bus(secure.robot_dir)
    assert (one.machine, one.role) == ("robot1", "robot")
    writer = one.create_publisher("Base/Drive/State")
    writer.write(msgs.Odometry(x=1.5))
    one.create_service("base/motor_power", lambda on: f"motors {'on' if on else 'off'}")
    one.declare_module("base")
    # The command reader is declared before the late reader's query, which the router passes on after it: once the
    # query is answered, the router knows where commands go (a value has no other way of saying it was missed).
    commands = two.create_reader("motion/command")
    # A late reader on the other machine gets the newest value, then the next one.
    reader = two.create_reader("Base/Drive/State")
    assert (reader.read() or reader.wait_for_update(timeout=TIMEOUT)).x == 1.5
    writer.write(msgs.Odometry(x=2.5))
    assert reader.wait_for_update(timeout=TIMEOUT).x == 2.5  # type: ignore[union-attr]
    # Commands and commanding services too.
    one.create_publisher("motion/command").write(msgs.ActuatorState(velocity=[0.2, 0.0]))
    assert commands.wait_for_update(timeout=TIMEOUT).velocity == [0.2, 0.0]  # type: ignore[union-attr]
    assert two.call("base/motor_power", True, timeout=TIMEOUT) == "motors on"
    two.wait_for_module("base", TIMEOUT)


def test_a_viewer_reads_watches_and_calls_the_services_that_read(secure: Secure) -> None:
    robot = secure.bus(secure.robot_dir)
    robot.create_publisher("Base/Drive/State").write(msgs.Odometry(x=3.0))
    robot.create_service("mom/base", lambda _req: {"name": "base"})
    robot.create_service("base/list_parameters", lambda _req: ["ticks_per_metre"])
    robot.declare_module("base")
    commands = robot.create_publisher("motion/command")

    viewer = secure.bus(secure.viewer_dir)
    assert viewer.role == "viewer"
    seen = viewer.create_reader("motion/command")  # known to the router once the query below is answered
    state = viewer.create_reader("Base/Drive/State")
    assert (state.read() or state.wait_for_update(timeout=TIMEOUT)).x == 3.0
    viewer.wait_for_module("base", TIMEOUT)
    assert viewer.call("mom/base", timeout=TIMEOUT) == {"name": "base"}
    assert viewer.call("base/list_parameters", timeout=TIMEOUT) == ["ticks_per_metre"]
    # Watching the commands given is reading.
    commands.write(msgs.ActuatorState(velocity=[0.1, 0.0]))
    assert seen.wait_for_update(timeout=TIMEOUT).velocity == [0.1, 0.0]  # type: ignore[union-attr]


def test_the_router_drops_what_a_viewer_writes_and_the_services_it_may_not_call(secure: Secure) -> None:
    robot = secure.raw(secure.robot_dir)
    arrivals = Arrivals(robot, secure, "motion/command")
    called: list[str] = []
    motor = robot.declare_queryable(secure.key("@srv/base/motor_power"), lambda q: arrivals.note_call(called, q))
    viewer = secure.raw(secure.viewer_dir)
    try:
        _robot_ready(robot, viewer, secure)
        # The viewer knows the robot's subscriber: what it puts goes to the router, and stops there.
        _publisher_matched(viewer, secure.key("motion/command")).put(b"from the viewer")
        viewer.put(secure.key("Localization/Post_Pose"), b"a forged pose")  # not a command, still refused
        viewer.get(secure.key("@srv/base/motor_power"), payload=b"viewer", timeout=0.5)  # replies never looked at
        _probe(viewer, secure, "after")
        # The same put and call from a robot machine, opened only now, do arrive: once they have, the viewer's,
        # had they been passed on, would have arrived long before.
        robot_two = secure.raw(secure.robot_dir)
        _publisher_matched(robot_two, secure.key("motion/command")).put(b"from a robot")
        robot_two.get(secure.key("@srv/base/motor_power"), payload=b"robot", timeout=0.5)
        with arrivals.changed:
            assert arrivals.changed.wait_for(lambda: "put from a robot" in arrivals.seen and called, TIMEOUT)
            assert [s for s in arrivals.seen if s.startswith("put")] == ["put from a robot"], arrivals.seen
            assert called == ["robot"]
    finally:
        arrivals.close()
        motor.undeclare()  # type: ignore[no-untyped-call]


def test_pluto_on_a_viewer_refuses_to_command_in_one_line(secure: Secure) -> None:
    viewer = secure.bus(secure.viewer_dir)
    with pytest.raises(BusError, match=r"cannot command motion/command: .* viewer \(laptop\)"):
        viewer.create_publisher("motion/command").write(msgs.ActuatorState(velocity=[0.3, 0.0]))
    with pytest.raises(BusError, match=r"cannot call base/motor_power: .* viewer \(laptop\)"):
        viewer.call("base/motor_power", True, timeout=TIMEOUT)


def test_a_viewer_cannot_pose_as_a_writer_a_service_or_a_module(secure: Secure) -> None:
    robot = secure.raw(secure.robot_dir)
    arrivals = Arrivals(robot, secure, "motion/command")
    state = robot.declare_queryable(secure.key("Base/Drive/State"), lambda q: q.reply(q.key_expr, b"real"))
    viewer = secure.raw(secure.viewer_dir)
    forged = viewer.declare_queryable(secure.key("Base/Drive/State"), lambda q: q.reply(q.key_expr, b"forged"))
    token = viewer.liveliness().declare_token(secure.key("@module/base"))
    try:
        _robot_ready(robot, viewer, secure)
        _probe(viewer, secure, "after the declarations")  # they went before it, through the same link
        reader = secure.raw(secure.robot_dir)
        answers = [r.ok.payload.to_string() for r in reader.get(secure.key("Base/Drive/State"), timeout=TIMEOUT)]
        assert answers == ["real"]
        modules = [str(r.ok.key_expr) for r in reader.liveliness().get(secure.key("@module/**"), timeout=TIMEOUT)]
        assert modules == []
    finally:
        arrivals.close()
        token.undeclare()  # type: ignore[no-untyped-call]
        forged.undeclare()  # type: ignore[no-untyped-call]
        state.undeclare()  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("which", ["issued after the router started", "revoked"])
def test_a_machine_the_router_does_not_list_gets_nothing(secure: Secure, which: str) -> None:
    # Issued by the same CA: TLS lets it in, access control allows it nothing.
    late_dir = ca.add_machine(secure.ca_dir, "late", "robot") if which != "revoked" else secure.revoked_dir
    robot = secure.bus(secure.robot_dir)
    robot.create_publisher("Base/Drive/State").write(msgs.Odometry(x=4.0))
    commands = robot.create_reader("motion/command")
    late = secure.raw(late_dir)
    got: list[str] = []
    late.declare_subscriber(secure.key("Base/**"), lambda s: got.append(str(s.key_expr)))
    late.put(secure.key("motion/command"), b"from the late machine")
    # Its query reaches nobody (the router neither passes it on nor lets a reply back): it ends by its timeout.
    assert [r for r in late.get(secure.key("Base/Drive/State"), timeout=2.0) if r.ok is not None] == []
    # Meanwhile an enrolled viewer is sent what the robot writes, the late machine nothing; its put, sent before
    # its query timed out, never reached the robot.
    viewer = secure.bus(secure.viewer_dir)
    seen = viewer.create_reader("Base/Drive/State")
    assert (seen.read() or seen.wait_for_update(timeout=TIMEOUT)).x == 4.0
    robot.create_publisher("Base/Drive/State").write(msgs.Odometry(x=5.0))
    seen.wait_for_update(timeout=TIMEOUT)
    assert got == []
    assert commands.read() is None


# -- what a user sees -----------------------------------------------------------------------------------------------


def _pluto(secure: Secure, *args: str, tls: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLUTO_")}
    env.update(PLUTO_ROBOT=secure.robot, PLUTO_CONNECT=secure.endpoint)
    if tls is not None:
        env["PLUTO_TLS"] = str(tls)
    return subprocess.run(
        [sys.executable, "-m", "pluto", *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def _one_line(done: subprocess.CompletedProcess[str], expected: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    error = done.stderr.strip()
    assert "\n" not in error and "Traceback" not in error, error
    assert re.search(expected, error), error


def test_what_keeps_a_machine_off_the_bus_is_told_in_one_line(secure: Secure, tmp_path: Path) -> None:
    _one_line(
        _pluto(secure, "mom", tls=tmp_path / "nowhere"),
        r"bus\.tls: the CA certificate .*nowhere/ca\.pem does not exist",
    )
    old = ca.add_machine(secure.ca_dir, "old", "robot", days=10, now=datetime.datetime(2021, 3, 1, tzinfo=datetime.UTC))
    _one_line(_pluto(secure, "mom", tls=old), r"certificate of 'old' .* expired on 2021-03-11")
    # A router's certificate is no client's: the router refuses it in the TLS handshake.
    _one_line(_pluto(secure, "mom", tls=secure.router_dir), r"the router at 127\.0\.0\.1:\d+ refused this machine's")
    # A machine of another robot's CA refuses the router's certificate.
    stranger = ca.add_machine(ca.init_ca(tmp_path / "other", name="other").directory, "robot1", "robot")
    _one_line(
        _pluto(secure, "echo", "Heartbeat", tls=stranger), "the router's certificate is not from this machine's CA"
    )
    # Nothing there.
    env_endpoint = secure.endpoint
    secure.endpoint = f"tls/127.0.0.1:{free_tcp_port()}"
    try:
        _one_line(_pluto(secure, "mom", tls=secure.robot_dir), r"nothing listens at 127\.0\.0\.1:\d+")
    finally:
        secure.endpoint = env_endpoint
    # A tls/ endpoint without a certificate, a tcp/ one with.
    _one_line(_pluto(secure, "mom"), "a tls/ endpoint needs this machine's certificate")


def test_a_secure_router_refuses_to_start_wrong_in_one_line(tmp_path: Path, bus_env: dict[str, str]) -> None:
    secure = Secure(tmp_path, bus_env["PLUTO_ROBOT"])
    port = free_tcp_port()
    cases = [
        (["--listen", f"tcp/127.0.0.1:{port}"], "a secure router listens on tls/ endpoints only"),
        (
            ["--tls", str(secure.router_dir), "--listen", f"tls/10.9.9.9:{port}"],
            r"names router, .* but not 10\.9\.9\.9",
        ),
        (["--tls", str(tmp_path / "none")], "no router certificate in"),
        (["--tls", str(secure.robot_dir)], "is a certificate of a robot"),
    ]
    for args, expected in cases:
        _one_line(_pluto(secure, "router", "--secure", *args), expected)
    _one_line(_pluto(secure, "router", "--tls", str(secure.router_dir)), "add --secure")


# -- the rules themselves ------------------------------------------------------------------------------------------


def test_the_rules_cover_every_key_of_the_bus() -> None:
    from pluto.bus import lockstep
    from pluto.bus.session import ROSTER, SESSIONS
    from pluto.runtime.module import STARTING_KEY

    keys = [
        "pluto/r/Base/Drive/State",
        "pluto/r/**",
        f"{SESSIONS}/abc",
        ROSTER,
        "pluto/r/@srv/base/motor_power",
        "pluto/r/@module/base",
        "pluto/r/@writer/1f/pluto-pub-1",
        f"pluto/r/{STARTING_KEY}/base",
        f"pluto/r/{lockstep.TICK_KEY}",
        f"pluto/r/{lockstep.ACK_KEY}",
        f"pluto/r/{lockstep.MEMBER_KEY}/base",
    ]
    rules = [zenoh.KeyExpr(k) for k in ROBOT_KEYS]
    for key in keys:
        assert any(rule.includes(zenoh.KeyExpr(key)) for rule in rules), key


@pytest.mark.parametrize(
    ("service", "allowed"),
    [
        ("mom/base", True),
        ("base/list_parameters", True),
        ("slam/get_parameters", True),
        ("base/geometry", True),
        ("base/motor_power", False),
        ("base/place", False),
        ("drive/set_parameters", False),
        ("motion/start_activity", False),
        ("sim/pause", False),
        ("sick/fault", False),
        ("mom/base/extra", False),
    ],
)
def test_which_services_a_viewer_may_call(service: str, allowed: bool) -> None:
    assert viewer_may_call(service) is allowed


def test_with_nobody_enrolled_the_rules_allow_nothing() -> None:
    section = access_control([])
    assert section["default_permission"] == "deny"
    assert [s["cert_common_names"] for s in section["subjects"]] == [["no machine enrolled"]]

"""The ``netmotion`` module: the NetworkMotionServer on UDP, with the motion manager that drives the arm.

Clients send text commands over UDP (port 15000, bound to 127.0.0.1 unless ``host`` says otherwise; the protocol
is in :mod:`pluto.gateways.netmotion.codec`): ``PING``, ``FK``, ``RUNMS`` (a motion file of the ``motions``
directory), ``IKP`` (point inverse kinematics), ``STOP``, ``LIST``, ``JOINTS``. Motions run in the module's
motion manager, one frame every 1/``rate_hz`` s (32 ms by default) of the module's clock; each frame's blended joint
values go out on ``Arm/Command`` and the joint values come back on ``Arm/State``.

The arm is the ``arm`` module, used only through the bus: ``Arm/State`` in, ``Arm/Command`` out, and its proxy
(:class:`~pluto.hardware.arm.proxy.ArmProxy`) for the arm's own model (the joint table, limits and frames that
motion files, FK and IK need). The module requires it: ``pluto netmotion`` runs both in one process, ``pluto up
netmotion`` starts both as daemons, and ``pluto start netmotion`` expects it running (``pluto start arm``); at start
the module waits ``arm_timeout`` s at most for it to publish.
``netmotion/status`` (FVectorState) counts what the server saw: ``data`` = [datagrams, oversized dropped,
rate-limited dropped, refused (ERR), failures, arm commands dropped out of range], ``element`` = [running motions,
client hosts, UDP port].

Limits against floods, per client host (its IP address, all its source ports together): each host may send
``client_rate`` datagrams a second (50; bursts of ``client_burst``, 100), and the server handles ``budget_rate``
datagrams a second in all (1000; bursts of ``budget_burst``, 200), shared equally by the hosts that have datagrams
waiting: each host's datagrams wait in a queue of their own (``client_queue``, 8) and the hosts are served in turn.
A client that stays within its host's share (``budget_rate`` / hosts sending, and its host's rate) is answered
however hard other hosts flood, from however many ports; what is over a limit is dropped before it is parsed and
counted as rate-limited. Clients on one computer (or behind one NAT) share its limits. The socket asks the kernel
for a receive buffer of ``receive_buffer`` bytes (4 MiB; Linux grants at most ``net.core.rmem_max``) so that a flood
is drained by the server, which drops it cheaply, rather than by the kernel, which would drop every client alike.

What a client sends is range-checked before it reaches the arm: IKP coordinates (at most 100 m, finite), and the
motion files RUNMS names: keyframe times must be finite and within :data:`MOTION_TIME` (0 .. 1 h), joint values
within :data:`JOINT_VALUE` (what ``Arm/Command`` accepts, :mod:`pluto.limits`; values beyond a joint's own limits are
held to them), weights within :data:`WEIGHT` (0 .. 1000); anything else is refused with ``ERR`` and counted. Every
``Arm/Command`` is checked again (:func:`pluto.limits.check`) before it is written; one out of range is dropped and
counted (``data[5]`` of ``netmotion/status``).

When the simulated time jumps back (a new run, a replay started again), the running motions stop (their owners get
DEACTIVATE): they were timed on the old run's clock.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import numpy as np
from numpy.typing import NDArray

import pluto.hardware.arm
from pluto import msgs, names
from pluto.errors import ConfigError, LaunchError, PlutoError
from pluto.gateways.netmotion.codec import MAX_DATAGRAM
from pluto.gateways.netmotion.server import (
    DEFAULT_PORT,
    DEFAULT_RECEIVE_BUFFER,
    Address,
    NetMotionService,
    ServerLimits,
    UdpNetMotionServer,
)
from pluto.hardware.arm.manager import MotionEventKind, MotionManager
from pluto.hardware.arm.motion import MotionFileError, MotionLibrary, MotionSequence, Posture
from pluto.hardware.arm.playback import DEFAULT_TIMEOUT, DEFAULT_TOLERANCE, Motion, PosturePlayer, SequencePlayer
from pluto.hardware.arm.proxy import ArmProxy
from pluto.limits import Bound, LimitError, check, command_limits
from pluto.runtime import launcher
from pluto.runtime.module import Module, ModuleParams
from pluto.runtime.ranges import Port, Rate, Timeout, between

__all__ = [
    "JOINT_VALUE",
    "MOTION_TIME",
    "PACKAGED_MOTIONS",
    "WEIGHT",
    "NetMotionModule",
    "NetMotionParams",
]

PACKAGED_MOTIONS = Path(pluto.hardware.arm.__file__).parent / "motions"
"""The example motions shipped with Pluto (the default motion directory)."""

MOTION_TIME = Bound(0.0, 3600.0, "s")
"""Keyframe times (and lengths) a motion file may have."""
JOINT_VALUE = command_limits(names.ARM_COMMAND)["position"][0]
"""Joint values a motion file may hold, rad or m: those ``Arm/Command`` accepts (values beyond a joint's own limits
but within these are held to the joint's limits)."""
WEIGHT = Bound(0.0, 1000.0)
"""Weights a motion file's joint values may have."""

STATUS_PERIOD = 1.0  # s between writes of netmotion/status


class NetMotionParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Attributes:
    rate_hz: motion frames per second (31.25: a frame every 32 ms, as on the reference arm).
    host: address the UDP socket binds to.
    port: UDP port (0 picks a free one).
    motions: the motion directory RUNMS reads from ("" for the examples shipped with Pluto).
    arm_timeout: how long to wait at start for the arm module to publish, s.
    tolerance: how close every joint must come to a posture's target, rad.
    posture_timeout: time after which a posture counts as done anyway, s.
    max_datagram: larger datagrams are dropped, bytes.
    client_rate: datagrams per second a client host (IP address, all its ports together) may send (more are
        dropped), > 0.
    client_burst: datagrams a client host may send at once, >= 1.
    budget_rate: datagrams per second the server handles in all, shared equally by the hosts with datagrams
        waiting, > 0.
    budget_burst: datagrams the server may handle at once, >= 1.
    client_queue: datagrams of one client host that may wait for the budget (more are dropped), 1..4096.
    receive_buffer: kernel receive buffer to ask for the socket, bytes (0: the system's default).
    prepare_ik: build the inverse-kinematics table of the arm's last frame (the gripper) in the background at start,
        so the first IKP answers at once (else the first IKP of each link takes a fraction of a second).
    """

    rate_hz: Rate = 31.25
    host: str = "127.0.0.1"
    port: Port = DEFAULT_PORT
    motions: str = ""
    arm_timeout: Timeout = 15.0
    tolerance: Annotated[float, between(0.0, 10.0, open_low=True)] = DEFAULT_TOLERANCE
    posture_timeout: Timeout = DEFAULT_TIMEOUT
    max_datagram: Annotated[int, between(16, 65535)] = MAX_DATAGRAM
    client_rate: Annotated[float, between(0.0, 1e9, open_low=True)] = 50.0
    client_burst: Annotated[float, between(1.0, 1e9)] = 100.0
    budget_rate: Annotated[float, between(0.0, 1e9, open_low=True)] = 1000.0
    budget_burst: Annotated[float, between(1.0, 1e9)] = 200.0
    client_queue: Annotated[int, between(1, 4096)] = 8
    receive_buffer: Annotated[int, between(0, 1073741824)] = DEFAULT_RECEIVE_BUFFER
    prepare_ik: bool = True


class NetMotionModule(Module[NetMotionParams]):
    """The NetworkMotionServer and the motion manager of the arm."""

    name = "netmotion"
    description = "NetworkMotionServer: UDP text commands to run motions, IK and FK on the arm"
    provides = (names.NETMOTION_STATUS,)
    requires = ("arm",)
    Params = NetMotionParams

    arm: ArmProxy
    """The arm module's proxy: its model and kinematics (the joint values go by ``Arm/State`` and ``Arm/Command``)."""

    def on_configure(self) -> None:
        p = self.params
        self._manager_lock = threading.Lock()  # the motion manager: the step, the server's thread, clock jumps
        self.refused_commands = 0
        """Arm commands out of range (pluto.limits), dropped instead of written."""
        self.server: UdpNetMotionServer | None = None
        self._ik_cancel = threading.Event()
        self._ik_thread: threading.Thread | None = None
        try:
            self.arm = self._find_arm(p.arm_timeout)
            self.model = self.arm.model
            self.library = MotionLibrary(p.motions or PACKAGED_MOTIONS, self.model)
            outputs = self.model.links[: self.model.num_outputs]
            self._prismatic = np.array([link.type == "prismatic" for link in outputs])
            self.manager = MotionManager(self.model.num_outputs)
            self.arm_state = self.create_reader(names.ARM_STATE)
            self.arm_command = self.create_publisher(names.ARM_COMMAND)
            self.status_out = self.create_publisher(names.NETMOTION_STATUS)
            limits = ServerLimits(
                max_datagram=p.max_datagram,
                rate=p.client_rate,
                burst=p.client_burst,
                budget=p.budget_rate,
                budget_burst=p.budget_burst,
                queue=p.client_queue,
            )
            self.service = NetMotionService(self, limits)
            self.server = UdpNetMotionServer(self.service, p.host, p.port, p.receive_buffer)
            try:
                self.server.start()
            except OSError as err:
                raise ConfigError(f"netmotion cannot listen on udp {p.host}:{p.port}: {err.strerror or err}") from err
        except BaseException:
            self.on_shutdown()
            raise
        self._next_status = -math.inf
        self.publish_status(self.clock.now())
        if p.prepare_ik:
            last = self.model.links[-1].index
            self._ik_thread = threading.Thread(target=self._prepare_ik, args=(last,), name="netmotion-ik-table")
            self._ik_thread.start()

    def _find_arm(self, timeout: float) -> ArmProxy:
        """The arm module's proxy, once the module publishes (``timeout`` s at most).

        Raises:
            LaunchError: the arm module is not running (saying how to start it).
        """
        try:
            launcher.wait_publishing(self.bus, ArmProxy.module, timeout)
            return ArmProxy(self.bus, mask=0, start=False, timeout=timeout)
        except LaunchError as err:
            raise LaunchError(
                f"netmotion drives the arm module, which is not running on robot {self.bus.robot} ({err}): start "
                "it first (`pluto start arm`), or both at once (`pluto netmotion`, `pluto up netmotion`)"
            ) from None

    def _prepare_ik(self, link: int) -> None:
        with contextlib.suppress(ValueError):  # a frame no joint moves: nothing to prepare
            self.arm.prepare_ik(link, self._ik_cancel)

    @property
    def address(self) -> tuple[str, int]:
        """The address the server listens on (its real port when ``port`` was 0)."""
        assert self.server is not None
        return self.server.address

    # -- the control step: one motion frame ---------------------------------------------------------------------

    def step(self, now: float) -> None:
        current = self.current_joints()
        with self._manager_lock:
            command = self.manager.step(now, current)
            events = self.manager.take_events()
        if command is not None:
            message = msgs.ActuatorState(stamp=now, position=command.tolist(), force=[1.0 / self.params.rate_hz])
            try:
                check(names.ARM_COMMAND, message)
                self.arm_command.write(message)
            except LimitError as err:
                self.refused_commands += 1
                if self.refused_commands % 100 == 1:
                    self.get_logger().error("arm command dropped (%d so far): %s", self.refused_commands, err)
        self.send_events(events)
        if now >= self._next_status:
            self.publish_status(now)

    def on_clock_jump(self, old: float, new: float) -> None:
        # The motions were timed on the old run's clock: they stop (their owners get DEACTIVATE at the next frame),
        # and the status is written again at once instead of when the new run reaches the old run's schedule.
        with self._manager_lock:
            stopped = [motion.id for motion in self.manager.running()]
            for motion_id in stopped:
                self.manager.remove(motion_id, new)
        self._next_status = -math.inf
        self.get_logger().info(
            "simulated time restarted (%.3f s -> %.3f s): %d running motions stopped", old, new, len(stopped)
        )

    def send_events(self, events: Sequence[object]) -> None:
        """Send STATUS and DEACTIVATE events to the clients that own the motions (ACTIVATE was the reply)."""
        server = self.server
        if server is None:
            return
        for event in events:
            kind = getattr(event, "kind", None)
            owner = getattr(event, "owner", None)
            if kind in (MotionEventKind.STATUS, MotionEventKind.DEACTIVATE) and owner is not None:
                assert isinstance(kind, MotionEventKind)
                server.send(self.service.motion_response(int(getattr(event, "id", 0)), kind.value), owner)

    def publish_status(self, now: float) -> None:
        self._next_status = now + STATUS_PERIOD
        s = self.service.statistics()
        with self._manager_lock:
            running = len(self.manager)
        port = self.server.address[1] if self.server is not None else 0
        self.status_out.write(
            msgs.FVectorState(
                stamp=now,
                data=[
                    float(s.datagrams),
                    float(s.oversized),
                    float(s.rate_limited),
                    float(s.refused),
                    float(s.failures),
                    float(self.refused_commands),
                ],
                element=[running, self.service.clients, port],
            )
        )

    def current_joints(self) -> NDArray[np.float64]:
        """The arm's joint values now (from ``Arm/State``; the home posture until it has a value)."""
        state = self.arm_state.read()
        if state is None or len(state.position) != self.model.num_outputs:
            return self.model.home.copy()
        values = np.array(state.position, dtype=np.float64)
        return values if np.isfinite(values).all() else self.model.home.copy()

    # -- the motion service the server calls (on its own thread) ------------------------------------------------

    def forward_kinematics(self, link: int) -> NDArray[np.float64]:
        return self.arm.forward_kinematics(link, self.current_joints())

    def _add(self, motion: Motion, owner: Address) -> int:
        current = self.current_joints()
        with self._manager_lock:
            return self.manager.add(motion, self.clock.now(), current, owner)

    def run_motion(self, filename: str, owner: Address) -> int:
        parsed = self.library.load(filename)
        self._check_motion(parsed, filename)
        model = self.model
        motion: Motion
        if isinstance(parsed, MotionSequence):
            motion = SequencePlayer(parsed, model.num_outputs, model.lower, model.upper)
        else:
            motion = self._posture(parsed)
        return self._add(motion, owner)

    def _check_motion(self, motion: MotionSequence | Posture, source: str) -> None:
        """Refuse a motion whose times, joint values or weights are out of range (MotionFileError)."""
        try:
            if isinstance(motion, MotionSequence):
                MOTION_TIME.check("the motion's length", motion.end)
                values = [(i, k.time, k.value, k.weight) for i, frames in motion.keyframes.items() for k in frames]
            else:
                values = [(i, 0.0, value, weight) for i, (value, weight) in motion.values.items()]
            for index, time, value, weight in values:
                link = self.model.links[index]
                MOTION_TIME.check(f"a keyframe time of {link.name}", time)
                bound = JOINT_VALUE if link.type != "prismatic" else Bound(JOINT_VALUE.low, JOINT_VALUE.high, "m")
                bound.check(f"a value of {link.name}", value)
                WEIGHT.check(f"a weight of {link.name}", weight)
        except LimitError as err:
            raise MotionFileError(source, 0, str(err)) from None

    def _posture(self, posture: Posture, label: str = "") -> PosturePlayer:
        p = self.params
        model = self.model
        return PosturePlayer(
            posture,
            model.num_outputs,
            model.lower,
            model.upper,
            self._prismatic,
            tolerance=p.tolerance,
            timeout=p.posture_timeout,
            label=label,
        )

    def point_ik(self, link: int, target: tuple[float, float, float], owner: Address) -> int:
        index = self.model.link(link).index
        moved = self.arm.ik_joints(index)
        result = self.arm.point_ik(index, target, self.current_joints())
        mm = " ".join(f"{1000.0 * c:g}" for c in target)
        if not np.isfinite(result.q[list(moved)]).all():
            raise PlutoError(f"IKP {index} {mm}: no solution")
        if not result.success:
            self.get_logger().info("IKP %d %s: not reachable, %.1f mm short", index, mm, result.error * 1000.0)
        posture = Posture(f"IKP {index}", {j: (float(result.q[j]), 1.0) for j in moved})
        return self._add(self._posture(posture, label=f"IKP {index} {mm}"), owner)

    def stop_motion(self, motion_id: int) -> bool:
        with self._manager_lock:
            return self.manager.remove(motion_id, self.clock.now())

    def motions(self) -> list[tuple[int, str]]:
        with self._manager_lock:
            return [(m.id, m.description) for m in self.manager.running()]

    def joints(self) -> tuple[NDArray[np.float64], Sequence[bool]]:
        return self.current_joints(), [bool(p) for p in self._prismatic]

    def on_shutdown(self) -> None:
        ik_thread = getattr(self, "_ik_thread", None)
        if ik_thread is not None:  # joined, not left running into the interpreter's exit
            self._ik_cancel.set()
            ik_thread.join()
        server, self.server = getattr(self, "server", None), None
        if server is not None:
            server.close()
        arm = getattr(self, "arm", None)
        if arm is not None:
            arm.close()

"""The pages' links to their modules: each turns a page's actions into proxy calls and reads the status to show.

Strategy: one small class per page, all alike (:class:`Link`): :meth:`Link.connect` opens the module's proxy
(``start=False``: a keyboard program never starts a module behind the user's back), :meth:`Link.act` carries out an
action of :mod:`pluto.cli.key.keymap` with the numbers typed for it, :meth:`Link.tick` keeps the dead-man rule of
:mod:`pluto.cli.key.teleop`, :meth:`Link.status_lines` says the module's state in words (:mod:`pluto.cli.key.status`).
Actions that wait for a reply (a service call, find wall, save map) are listed in ``blocking`` so the program runs
them off its screen thread; everything else only writes a command and returns at once. No Textual here.
"""

from __future__ import annotations

import abc
import math
from typing import Any, ClassVar

from pluto import msgs, names
from pluto.bus import Bus, StateReader
from pluto.cli.key import status as words
from pluto.cli.key.keymap import MOVE_ACTIONS, PAGES, Page
from pluto.cli.key.teleop import Movement, Teleop, TeleopParams
from pluto.proxies import ArmProxy, AvoidProxy, DriveProxy, LocProxy, MotionProxy, PoseProxy, Proxy, SlamProxy

__all__ = [
    "LINKS",
    "ArmLink",
    "AvoidLink",
    "DriveLink",
    "Link",
    "LocLink",
    "MotionLink",
    "PoseLink",
    "SlamLink",
    "WristLink",
    "WristProxy",
    "make_link",
]


class WristProxy(Proxy):
    """Client of the wrist: interface 0 is ``Wrist/State``; commands go to ``Wrist/Command`` (pan, tilt) in rad,
    rad/s, rad/s²."""

    module: ClassVar[str] = "wrist"
    interfaces: ClassVar[tuple[str, ...]] = (names.WRIST_STATE,)

    def state(self) -> msgs.ActuatorState | None:
        """The newest ``Wrist/State`` (None before the first)."""
        value = self.get(0)
        return value if isinstance(value, msgs.ActuatorState) else None

    def point(self, pan: float, tilt: float, speed: float = 1.0, accel: float = 4.0) -> None:
        """Move to ``pan``, ``tilt`` rad (tilt positive down) at up to ``speed`` rad/s and ``accel`` rad/s².

        Raises:
            LimitError: a value out of the interface's range.
        """
        self.write(
            names.WRIST_COMMAND,
            msgs.ActuatorState(position=[pan, tilt], velocity=[speed, speed], force=[accel, accel]),
        )


class Link(abc.ABC):
    """A page's link to its module.

    Args:
        bus: the program's bus.
        params: speeds and timing of the movement keys (pages that move the robot).

    Attributes:
        page: the page this link serves.
        proxy: the module's proxy, once :meth:`connect` succeeded.
        message: the last thing an action said (shown under the status).
    """

    page_name: ClassVar[str] = ""
    blocking: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, bus: Bus, params: TeleopParams | None = None) -> None:
        self.bus = bus
        self.page: Page = PAGES[self.page_name]
        self.teleop = Teleop(params)
        self.proxy: Any = None
        self.message = ""

    @property
    def connected(self) -> bool:
        """True once the proxy is open."""
        return self.proxy is not None

    def connect(self, timeout: float = 2.0) -> None:
        """Open the module's proxy (the module must be running).

        Raises:
            LaunchError: the module is not running, or does not publish within ``timeout`` s.
        """
        if self.proxy is None:
            self.proxy = self._open(timeout)

    @abc.abstractmethod
    def _open(self, timeout: float) -> Any:
        """Open the proxy of the module (within ``timeout`` s)."""

    def act(self, action: str, values: tuple[float, ...], now: float) -> None:
        """Carry out ``action`` (with the numbers typed for it) at ``now`` (s, monotonic).

        Raises:
            ValueError: a value the module does not accept.
            BusTimeout: a module that did not answer (blocking actions).
        """
        if action in MOVE_ACTIONS:
            movement = self.teleop.key(action, now)
            if movement is not None:
                self.send(movement)
        elif self.teleop.adjust(action):
            self.message = f"speed {self.teleop.speed:.2f} m/s, turn rate {self.teleop.turn_rate:.2f} rad/s"
        elif action == "stop":
            self.stop()
        else:
            self._act(action, values)

    def _act(self, action: str, values: tuple[float, ...]) -> None:
        raise ValueError(f"{self.page.name} has no action {action!r}")

    def tick(self, now: float) -> None:
        """Keep the dead-man rule: re-send a held movement, send a zero once its key stopped repeating."""
        movement = self.teleop.tick(now)
        if movement is not None and self.proxy is not None:
            self.send(movement)

    def send(self, movement: Movement) -> None:  # noqa: B027 (an optional hook)
        """Send a movement command (pages that move the robot)."""

    def stop(self) -> None:
        """Stop at once (Space, Esc, and on quitting)."""
        self.teleop.stop()

    def status_lines(self) -> list[str]:
        """The module's state in words."""
        return []

    def close(self) -> None:
        """Close the proxy (the module keeps running)."""
        if self.proxy is not None:
            self.proxy.close()
            self.proxy = None


class _MovingLink(Link):
    """A page whose arrows drive the robot (drive, avoid), with a heading mode."""

    def heading_now(self) -> float:
        """The robot's heading now, rad, in the frame the module holds headings in (0 if unknown)."""
        return 0.0

    def _act(self, action: str, values: tuple[float, ...]) -> None:
        if action == "heading_mode":
            if self.teleop.heading is None:
                self.teleop.set_heading_mode(self.heading_now())
                self.message = f"heading mode: holding {math.degrees(self.teleop.heading or 0.0):+.1f}°"
            else:
                self.teleop.set_heading_mode(None)
                self.message = "velocity mode"
        elif action == "heading":
            self.teleop.set_heading_mode(values[0])
            self.send(Movement(0.0, 0.0, self.teleop.heading))
            self.message = f"heading mode: turning to {math.degrees(self.teleop.heading or 0.0):+.1f}°"
        else:
            super()._act(action, values)

    def mode_line(self) -> str:
        mode = "velocity" if self.teleop.heading is None else f"heading {math.degrees(self.teleop.heading):+.1f}°"
        held = self.teleop.holding or "no key"
        return (
            f"keys: {mode} mode, speed {self.teleop.speed:.2f} m/s, turn rate {self.teleop.turn_rate:.2f} rad/s; "
            f"holding: {held}"
        )


class DriveLink(_MovingLink):
    """The drive page: velocity and heading commands on ``drive/command``."""

    page_name = "drive"

    def __init__(self, bus: Bus, params: TeleopParams | None = None) -> None:
        super().__init__(bus, params)
        self.protect = True
        self._odometry: StateReader[msgs.Odometry] | None = None

    def _open(self, timeout: float) -> DriveProxy:
        proxy = DriveProxy(self.bus, start=False, timeout=timeout)
        self._odometry = self.bus.create_reader(names.BASE_DRIVE_STATE)
        return proxy

    def heading_now(self) -> float:
        odometry = self._odometry.read() if self._odometry is not None else None
        return odometry.theta if odometry is not None else 0.0

    def _act(self, action: str, values: tuple[float, ...]) -> None:
        if action == "protect":
            self.protect = not self.protect
            self.message = f"sonar protection {'on' if self.protect else 'off'}"
        else:
            super()._act(action, values)

    def send(self, movement: Movement) -> None:
        drive: DriveProxy = self.proxy
        if movement.is_stop:
            drive.stop()
        elif movement.heading is not None:
            drive.hold_heading(movement.heading, movement.v, protect=self.protect)
        else:
            drive.set_velocity(movement.v, movement.w, protect=self.protect)

    def stop(self) -> None:
        super().stop()
        if self.proxy is not None:
            self.proxy.stop()

    def status_lines(self) -> list[str]:
        status = self.proxy.status() if self.proxy is not None else None
        protect = "on" if self.protect else "off"
        return [
            words.NO_STATUS if status is None else words.describe_drive(status),
            f"{self.mode_line()}; sonar protection {protect}",
        ]

    def close(self) -> None:
        if self._odometry is not None:
            self.bus.release(self._odometry)
            self._odometry = None
        super().close()


_AVOIDANCE = {0: "none", 1: "sonar", 2: "laser", 3: "sonar and laser"}


class AvoidLink(_MovingLink):
    """The avoid page: velocity steps and goto on ``avoidance/command``."""

    page_name = "avoid"

    def __init__(self, bus: Bus, params: TeleopParams | None = None) -> None:
        super().__init__(bus, params)
        self.avoidance = 3
        self._pose: StateReader[msgs.PoseEstimate] | None = None

    def _open(self, timeout: float) -> AvoidProxy:
        proxy = AvoidProxy(self.bus, start=False, timeout=timeout)
        self._pose = self.bus.create_reader(names.LOCALIZATION_POSE)
        return proxy

    def heading_now(self) -> float:
        pose = self._pose.read() if self._pose is not None else None
        return pose.pose[3] if pose is not None and len(pose.pose) > 3 else 0.0

    def _act(self, action: str, values: tuple[float, ...]) -> None:
        avoid: AvoidProxy = self.proxy
        if action == "goto":
            self.teleop.stop()
            avoid.goto(values[0], values[1], avoidance=self.avoidance)
            self.message = f"goto ({values[0]:g}, {values[1]:g}) m"
        elif action == "avoidance":
            self.avoidance = (self.avoidance + 1) % 4
            self.message = f"avoidance {self.avoidance} ({_AVOIDANCE[self.avoidance]})"
        elif action == "release":
            self.teleop.stop()
            avoid.release()
            self.message = "released: the avoid thread stopped (a new command starts it)"
        else:
            super()._act(action, values)

    def send(self, movement: Movement) -> None:
        avoid: AvoidProxy = self.proxy
        if movement.heading is not None:
            avoid.hold_heading(movement.heading, movement.v, self.avoidance)
        else:
            avoid.set_velocity(movement.v, movement.w, self.avoidance)

    def stop(self) -> None:
        super().stop()
        if self.proxy is not None:
            self.proxy.set_velocity(0.0, 0.0, self.avoidance)

    def status_lines(self) -> list[str]:
        status = self.proxy.status() if self.proxy is not None else None
        return [
            words.NO_STATUS if status is None else words.describe_avoid(status),
            f"{self.mode_line()}; avoidance {self.avoidance} ({_AVOIDANCE[self.avoidance]})",
        ]

    def close(self) -> None:
        if self._pose is not None:
            self.bus.release(self._pose)
            self._pose = None
        super().close()


class MotionLink(Link):
    """The motion page: moveto, explore, investigate, stop, resume, rectangle and release on ``motion/command``."""

    page_name = "motion"

    def _open(self, timeout: float) -> MotionProxy:
        return MotionProxy(self.bus, start=False, timeout=timeout)

    def _act(self, action: str, values: tuple[float, ...]) -> None:
        motion: MotionProxy = self.proxy
        if action == "moveto":
            motion.moveto(values[0], values[1])
            self.message = f"moveto ({values[0]:g}, {values[1]:g}) m"
        elif action == "explore":
            motion.explore(values[0], values[1])
            self.message = f"explore {2 * values[0]:g} m x {values[1]:g} m ahead"
        elif action == "investigate":
            motion.investigate()
            self.message = "investigate the closest object"
        elif action == "resume":
            motion.resume()
            self.message = "resume"
        elif action == "rectangle":
            b, h, x, y, theta = values
            motion.set_rectangle(b, h, x, y, theta)
            self.message = "rectangle removed" if b == 0 else f"rectangle {2 * b:g} m x {h:g} m set"
        elif action == "release":
            motion.release()
            self.message = "released: the motion and avoid threads stopped"
        else:
            super()._act(action, values)

    def stop(self) -> None:
        super().stop()
        if self.proxy is not None:
            self.proxy.stop()
            self.message = "stopped (r resumes)"

    def status_lines(self) -> list[str]:
        status = self.proxy.status() if self.proxy is not None else None
        return [words.NO_STATUS if status is None else words.describe_motion(status)]


class WristLink(Link):
    """The wrist page: pan and tilt steps on ``Wrist/Command``."""

    page_name = "wrist"

    def __init__(self, bus: Bus, params: TeleopParams | None = None) -> None:
        super().__init__(bus, params)
        self.step = math.radians(5.0)
        self.target: list[float] | None = None

    def _open(self, timeout: float) -> WristProxy:
        return WristProxy(self.bus, start=False, timeout=timeout)

    def _now(self) -> list[float]:
        state = self.proxy.state()
        return list(state.position[:2]) if state is not None and len(state.position) >= 2 else [0.0, 0.0]

    def _act(self, action: str, values: tuple[float, ...]) -> None:
        wrist: WristProxy = self.proxy
        steps = {"pan_left": (1, 0), "pan_right": (-1, 0), "tilt_up": (0, -1), "tilt_down": (0, 1)}
        if action in steps:
            target = self.target if self.target is not None else self._now()
            dp, dt = steps[action]
            self.target = [
                max(-math.pi, min(math.pi, target[0] + dp * self.step)),
                max(-math.pi / 2, min(math.pi / 2, target[1] + dt * self.step)),
            ]
        elif action == "centre":
            self.target = [0.0, 0.0]
        elif action == "bigger":
            self.step = min(math.radians(45.0), self.step * 2)
            self.message = f"step {math.degrees(self.step):.1f}°"
            return
        elif action == "smaller":
            self.step = max(math.radians(0.5), self.step / 2)
            self.message = f"step {math.degrees(self.step):.1f}°"
            return
        else:
            super()._act(action, values)
            return
        wrist.point(*self.target)

    def stop(self) -> None:
        super().stop()
        if self.proxy is not None:
            self.target = self._now()
            self.proxy.point(*self.target)
            self.message = "stopped where it is"

    def status_lines(self) -> list[str]:
        state = self.proxy.state() if self.proxy is not None else None
        return [words.describe_wrist(state, self.target), f"step {math.degrees(self.step):.1f}°"]


class PoseLink(Link):
    """The pose page: start and stop its thread, find wall, set pose (all wait for the module)."""

    page_name = "pose"
    blocking = frozenset({"start", "stop_thread", "find_wall", "set_pose"})

    def _open(self, timeout: float) -> PoseProxy:
        return PoseProxy(self.bus, start=False, timeout=timeout)

    def _act(self, action: str, values: tuple[float, ...]) -> None:
        pose: PoseProxy = self.proxy
        if action == "start":
            pose.start()
            self.message = "pose thread started"
        elif action == "stop_thread":
            pose.stop()
            self.message = "pose thread stopped"
        elif action == "find_wall":
            wall = pose.find_wall(timeout=5.0)
            if wall.points == 0:
                self.message = "find wall: no wall in front"
            else:
                self.message = (
                    f"find wall: {wall.points} points, {wall.rho:.3f} m away, normal at "
                    f"{math.degrees(wall.gamma):+.1f}° (σ {math.degrees(wall.gamma_std):.2f}°)"
                )
        elif action == "set_pose":
            x, y, theta = values
            pose.set_pose(x, y, theta)
            self.message = f"pose set to ({x:g}, {y:g}) m, {math.degrees(theta):+.1f}°; thread restarted"
        else:
            super()._act(action, values)

    def status_lines(self) -> list[str]:
        status = self.proxy.get(0) if self.proxy is not None else None
        return [words.describe_pose(status if isinstance(status, msgs.FVectorState) else None)]


class SlamLink(Link):
    """The slam page: start and stop its thread, save the map (all wait for the module)."""

    page_name = "slam"
    blocking = frozenset({"start", "stop_thread", "save"})

    def _open(self, timeout: float) -> SlamProxy:
        return SlamProxy(self.bus, start=False, timeout=timeout)

    def _act(self, action: str, values: tuple[float, ...]) -> None:
        slam: SlamProxy = self.proxy
        if action == "start":
            slam.start()
            self.message = "slam thread started"
        elif action == "stop_thread":
            slam.stop()
            self.message = "slam thread stopped, map saved"
        elif action == "save":
            info = slam.save()
            self.message = f"map saved: {info.walls} walls in {info.path}"
        else:
            super()._act(action, values)

    def status_lines(self) -> list[str]:
        status = self.proxy.get(0) if self.proxy is not None else None
        return [words.describe_slam(status if isinstance(status, msgs.FVectorState) else None)]


class LocLink(Link):
    """The localization page: the five pose interfaces, setting and resetting the pose."""

    page_name = "loc"

    def _open(self, timeout: float) -> LocProxy:
        return LocProxy(self.bus, start=False, timeout=timeout)

    def _act(self, action: str, values: tuple[float, ...]) -> None:
        loc: LocProxy = self.proxy
        if action in ("set_pose", "reset"):
            x, y, theta = values if action == "set_pose" else (0.0, 0.0, 0.0)
            loc.post_pose([x, y, 0.0, theta, 0.0, 0.0], -1)
            self.message = (
                f"posted ({x:g}, {y:g}) m, {math.degrees(theta):+.1f}° with setter -1 "
                "(stop the pose and slam threads first, or they set it again)"
            )
        elif action == "release":
            loc.post_pose([], 0)
            self.message = "setter back to 0"
        else:
            super()._act(action, values)

    def status_lines(self) -> list[str]:
        loc: LocProxy | None = self.proxy
        poses = [loc.get_pose(n) if loc is not None else None for n in range(5)]
        return words.describe_loc(poses)


class ArmLink(Link):
    """The arm page: joint steps on ``Arm/Command``."""

    page_name = "arm"
    blocking = frozenset({"home"})

    def __init__(self, bus: Bus, params: TeleopParams | None = None) -> None:
        super().__init__(bus, params)
        self.joint = 0
        self.step = math.radians(5.0)
        self.target: list[float] | None = None
        self.joint_names: tuple[str, ...] = ()

    def _open(self, timeout: float) -> ArmProxy:
        return ArmProxy(self.bus, start=False, timeout=timeout)

    def _now(self) -> list[float]:
        joints = self.proxy.joints()
        return list(joints) if joints else []

    def _act(self, action: str, values: tuple[float, ...]) -> None:
        arm: ArmProxy = self.proxy
        count = len(self._now()) or 1
        if action in ("previous_joint", "next_joint"):
            self.joint = (self.joint + (1 if action == "next_joint" else -1)) % count
            self.message = f"joint {self.joint} selected"
        elif action in ("joint_up", "joint_down"):
            current = self._now()
            if not current:
                raise ValueError("no Arm/State yet: the arm's joints are not known")
            target = self.target if self.target is not None and len(self.target) == len(current) else current
            target = list(target)
            target[self.joint] += self.step if action == "joint_up" else -self.step
            self.target = target
            position = [math.nan] * len(target)
            position[self.joint] = target[self.joint]
            arm.move(position)
        elif action == "bigger":
            self.step = min(math.radians(45.0), self.step * 2)
            self.message = f"step {math.degrees(self.step):.1f}°"
        elif action == "smaller":
            self.step = max(math.radians(0.5), self.step / 2)
            self.message = f"step {math.degrees(self.step):.1f}°"
        elif action == "home":
            home = [float(v) for v in arm.model.home]
            self.joint_names = tuple(arm.model.output_names)
            arm.move(home)
            self.target = home
            self.message = "going home"
        else:
            super()._act(action, values)

    def stop(self) -> None:
        super().stop()
        if self.proxy is not None and (current := self._now()):
            self.target = current
            self.proxy.move(current)
            self.message = "stopped where it is"

    def status_lines(self) -> list[str]:
        state = self.proxy.get(0) if self.proxy is not None else None
        lines = words.describe_arm(
            state if isinstance(state, msgs.ActuatorState) else None, self.joint_names, self.joint
        )
        return [*lines, f"step {math.degrees(self.step):.1f}°"]


LINKS: dict[str, type[Link]] = {
    cls.page_name: cls for cls in (DriveLink, AvoidLink, MotionLink, WristLink, PoseLink, SlamLink, LocLink, ArmLink)
}
"""The link class of every page."""


def make_link(page: str, bus: Bus, params: TeleopParams | None = None) -> Link:
    """The link of page ``page``.

    Raises:
        KeyError: no such page.
    """
    return LINKS[page](bus, params)

"""Each page of ``pluto key`` driven with Textual's pilot against stand-in modules on a real bus: the commands it
writes, the stop on Space and Esc, the zero command once a movement key stops repeating, the status in words."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from pluto import msgs, names
from pluto.bus import Bus
from pluto.cli.key.app import KeyApp
from pluto.cli.key.teleop import TeleopParams
from tests.cli.key.support import (
    Commands,
    FakeClock,
    StandIn,
    connected,
    next_command,
    run_app,
    screen_text,
    type_values,
    until,
)
from tests.helpers import wait_until

PARAMS = TeleopParams(speed=0.2, turn_rate=0.5, release_after=0.4, resend_every=0.1)


def status(element: list[int], data: list[float] | None = None) -> msgs.FVectorState:
    return msgs.FVectorState(data=data or [0.0, 0.0], element=element)


def velocity_is(v: float, w: float) -> Callable[[msgs.ActuatorState], bool]:
    return lambda c: c.velocity[:2] == pytest.approx([v, w])


def test_drive_page(make_bus: Callable[[], Bus]) -> None:
    """Arrows drive while held, a zero follows once the repeats stop, Space stops, speed keys step, heading mode
    holds the odometry heading, and the drive status shows in words."""
    module_bus, app_bus = make_bus(), make_bus()
    drive = StandIn(module_bus, "drive", {names.DRIVE_STATUS: status([0])})
    odometry = module_bus.create_publisher(names.BASE_DRIVE_STATE)
    odometry.write(msgs.Odometry(theta=1.0))
    commands = Commands(module_bus, names.DRIVE_COMMAND, msgs.ActuatorState)
    clock = FakeClock()
    app = KeyApp(app_bus, "drive", PARAMS, clock=clock)

    async def script(pilot: Pilot[None]) -> None:
        await connected(pilot, app)
        await until(pilot, lambda: "status 0 (normal)" in screen_text(app))
        # a held key: the first press and its repeats, each well within the release time
        await pilot.press("up")
        first = await next_command(pilot, commands, lambda c: c.cmd_flags == 10)
        assert first.velocity == pytest.approx([0.2, 0.0])
        for _ in range(5):
            clock.advance(0.15)
            await pilot.press("up")
        held = len(commands.snapshot())
        assert held >= 5  # re-sent while held (every repeat after resend_every)
        assert all(c.velocity[0] == pytest.approx(0.2) for c in commands.snapshot())
        clock.advance(0.5)  # the repeats stopped: one zero command
        zero = await next_command(pilot, commands, velocity_is(0.0, 0.0), after=held)
        assert zero.cmd_flags == 0
        count = len(commands.snapshot())
        await pilot.pause(0.2)
        assert len(commands.snapshot()) == count  # nothing more once released

        await pilot.press("right")
        await next_command(pilot, commands, velocity_is(0.0, -0.5), after=count)
        count = len(commands.snapshot())
        await pilot.press("space")  # stop at once, without waiting for the release
        stop = await next_command(pilot, commands, after=count)
        assert stop.cmd_flags == 0 and stop.velocity == [0.0, 0.0]

        await pilot.press("plus", "plus", "w")
        count = len(commands.snapshot())
        clock.advance(1.0)
        await pilot.press("w")
        faster = await next_command(pilot, commands, lambda c: c.velocity[0] > 0.2, after=count - 1)
        assert faster.velocity[0] == pytest.approx(0.3)
        count = len(commands.snapshot())
        await pilot.press("escape")
        await next_command(pilot, commands, velocity_is(0.0, 0.0), after=count)

        await pilot.press("h", "up")  # heading mode: hold the odometry heading, drive along it
        along = await next_command(pilot, commands, lambda c: c.cmd_flags == 11)
        assert along.position[1] == pytest.approx(1.0) and along.velocity[0] == pytest.approx(0.3)
        assert "heading" in screen_text(app)
        await type_values(pilot, "t", "0.5")
        typed = await next_command(pilot, commands, lambda c: c.cmd_flags == 11 and c.position[1] == 0.5)
        assert typed.velocity[0] == 0.0
        await pilot.press("p", "h", "space")  # protection off, back to velocity mode
        await pilot.press("up")
        unprotected = await next_command(pilot, commands, lambda c: c.cmd_flags == 0 and c.velocity[0] > 0)
        assert unprotected.velocity == pytest.approx([0.3, 0.0])

        drive.write(names.DRIVE_STATUS, status([-1], [0.0, 0.0]))
        await until(pilot, lambda: "timeout" in screen_text(app), what="drive status in words")
        count = len(commands.snapshot())
        clock.advance(0.2)  # a repeat of the key still held: re-sent
        await pilot.press("up")
        await next_command(pilot, commands, lambda c: c.velocity[0] > 0, after=count)
        before_quit.append(len(commands.snapshot()))

    before_quit: list[int] = []
    run_app(app, script)
    # quitting with a key held stops the robot at once
    wait_until(lambda: any(c.velocity == [0.0, 0.0] for c in commands.snapshot()[before_quit[0] :]))


def test_avoid_page(make_bus: Callable[[], Bus]) -> None:
    """Velocity keys with avoidance, goto typed x y, the avoidance choice, release, Space stop; status in words."""
    module_bus, app_bus = make_bus(), make_bus()
    avoid = StandIn(module_bus, "avoid", {names.AVOIDANCE_STATUS: status([0, 0])})
    commands = Commands(module_bus, names.AVOIDANCE_COMMAND, msgs.ActuatorState)
    clock = FakeClock()
    app = KeyApp(app_bus, "avoid", PARAMS, clock=clock)

    async def script(pilot: Pilot[None]) -> None:
        await connected(pilot, app)
        await pilot.press("w")
        forward = await next_command(pilot, commands)
        assert forward.cmd_flags == 30 and forward.velocity[:2] == pytest.approx([0.2, 0.0])
        count = len(commands.snapshot())
        clock.advance(0.8)  # no repeat came within the first repeat delay: released
        zero = await next_command(pilot, commands, after=count)
        assert zero.cmd_flags == 30 and zero.velocity[:2] == [0.0, 0.0]

        await type_values(pilot, "g", "3 -4.5")
        goto = await next_command(pilot, commands, lambda c: c.cmd_flags == 32)
        assert goto.position[:2] == [3.0, -4.5]
        count = len(commands.snapshot())
        await type_values(pilot, "g", "1e7 0")  # beyond the interface's limits: said on screen, nothing sent
        await until(pilot, lambda: "out of range [" in screen_text(app, "#message"))
        await type_values(pilot, "g", "3 x")  # a typo: said on screen, nothing sent
        await until(pilot, lambda: "not a number" in screen_text(app, "#message"))
        await pilot.press("escape")  # cancels the question and stops
        stop = await next_command(pilot, commands, after=count)
        assert stop.cmd_flags == 30 and stop.velocity[:2] == [0.0, 0.0]

        await pilot.press("v", "a")  # avoidance 0 (none): turn left
        left = await next_command(pilot, commands, lambda c: c.cmd_flags == 0)
        assert left.velocity[:2] == pytest.approx([0.0, 0.5])
        await pilot.press("r")
        await next_command(pilot, commands, lambda c: c.cmd_flags == -1)

        avoid.write(names.AVOIDANCE_STATUS, status([3, 1]))
        await until(pilot, lambda: "sonar front" in screen_text(app) and "goal reached" in screen_text(app))

    run_app(app, script)


def test_motion_page(make_bus: Callable[[], Bus]) -> None:
    """moveto, explore, investigate, stop, resume, rectangle and release with their codes; element[3] in words."""
    module_bus, app_bus = make_bus(), make_bus()
    motion = StandIn(module_bus, "motion", {names.MOTION_STATUS: status([0, 0, 0, 0])})
    commands = Commands(module_bus, names.MOTION_COMMAND, msgs.ActuatorState)
    app = KeyApp(app_bus, "motion", PARAMS)

    async def script(pilot: Pilot[None]) -> None:
        await connected(pilot, app)
        await until(pilot, lambda: "not in motion" in screen_text(app))
        await type_values(pilot, "m", "14 6.5")
        moveto = await next_command(pilot, commands, lambda c: c.cmd_flags == 42)
        assert moveto.position[:2] == [14.0, 6.5]
        await type_values(pilot, "e", "0 8")  # b must be > 0
        await until(pilot, lambda: "b must be > 0" in screen_text(app, "#message"))
        await pilot.press("escape")
        await type_values(pilot, "e", "3.5,8")
        explore = await next_command(pilot, commands, lambda c: c.cmd_flags == 44)
        assert explore.velocity[:2] == [3.5, 8.0]
        await pilot.press("i")
        await next_command(pilot, commands, lambda c: c.cmd_flags == 43)
        await pilot.press("space")
        stop = await next_command(pilot, commands, lambda c: c.cmd_flags == 20)
        assert stop.velocity[:2] == [0.0, 0.0]
        await pilot.press("r")
        await next_command(pilot, commands, lambda c: c.cmd_flags == 45)
        await type_values(pilot, "b", "2 5 1 1 0.5")
        rectangle = await next_command(pilot, commands, lambda c: c.cmd_flags == 46)
        assert rectangle.velocity[:2] == [2.0, 5.0] and rectangle.position[:2] == [1.0, 1.0]
        await pilot.press("x")
        await next_command(pilot, commands, lambda c: c.cmd_flags == -1)

        for code, words in (
            (-10, "thread stopped"),
            (3, "following a path"),
            (11, "towards the object"),
            (12, "circling"),
        ):
            motion.write(names.MOTION_STATUS, status([0, 0, -2, code]))
            await until(pilot, lambda w=words: w in screen_text(app), what=words)  # type: ignore[misc]
        assert "nearing the moveto point" in screen_text(app)

    run_app(app, script)


def test_wrist_page(make_bus: Callable[[], Bus]) -> None:
    """Pan and tilt steps from where the wrist is, a bigger step, centre, and Space holds where it is."""
    module_bus, app_bus = make_bus(), make_bus()
    here = [math.radians(10.0), 0.0]
    wrist = StandIn(module_bus, "wrist", {names.WRIST_STATE: msgs.ActuatorState(position=here, velocity=[0.0, 0.0])})
    commands = Commands(module_bus, names.WRIST_COMMAND, msgs.ActuatorState)
    app = KeyApp(app_bus, "wrist", PARAMS)

    async def script(pilot: Pilot[None]) -> None:
        await connected(pilot, app)
        await until(pilot, lambda: "pan +10.0°" in screen_text(app))
        await pilot.press("left")
        pan = await next_command(pilot, commands)
        assert pan.position == pytest.approx([math.radians(15.0), 0.0])
        assert all(v > 0 for v in pan.velocity) and all(a > 0 for a in pan.force)  # else the wrist does not move
        await pilot.press("plus", "down")  # step 10°, tilt down (positive)
        tilt = await next_command(pilot, commands, lambda c: c.position[1] > 0)
        assert tilt.position == pytest.approx([math.radians(15.0), math.radians(10.0)])
        await pilot.press("c")
        await next_command(pilot, commands, lambda c: c.position == [0.0, 0.0])
        wrist.write(names.WRIST_STATE, msgs.ActuatorState(position=[0.3, 0.1], velocity=[0.5, 0.0]))
        await until(pilot, lambda: "moving" in screen_text(app))
        await pilot.press("space")
        await next_command(pilot, commands, lambda c: c.position == pytest.approx([0.3, 0.1]))

    run_app(app, script)


def test_pose_page(make_bus: Callable[[], Bus]) -> None:
    """Start and stop the thread (its services), find wall (the pose/status exchange), set pose (stop, post with
    setter -1, wait for localization to show it, start again); the status in words."""
    from pluto.navigation.pose.tracker import FIND_WALL, SEARCHING

    module_bus, app_bus = make_bus(), make_bus()
    pose = StandIn(module_bus, "pose", {names.POSE_STATUS: status([1, 0, 0, 4, 0])})
    loc = StandIn(module_bus, "localization", {n: msgs.PoseEstimate() for n in names.LOCALIZATION_INTERFACES})

    def answer(value: msgs.FVectorState) -> None:
        if len(value.element) > 1 and value.element[1] == FIND_WALL:
            pose.write(names.POSE_STATUS, status([1, SEARCHING]))
            pose.write(names.POSE_STATUS, msgs.FVectorState(data=[0.1, 2.5, 1e-4, 0, 0, 1e-4], element=[1, 40]))

    def take(value: msgs.PoseEstimate) -> None:
        loc.write(names.LOCALIZATION_POSE, msgs.PoseEstimate(pose=list(value.pose), cmd_flags=value.cmd_flags))

    watch = module_bus.create_subscription(names.POSE_STATUS, answer, depth=64, current=False)
    posts = Commands(module_bus, names.LOCALIZATION_POST_POSE, msgs.PoseEstimate)
    module_bus.create_subscription(names.LOCALIZATION_POST_POSE, take, depth=64, current=False)
    app = KeyApp(app_bus, "pose", PARAMS)

    async def script(pilot: Pilot[None]) -> None:
        await connected(pilot, app)
        await until(pilot, lambda: "thread running" in screen_text(app) and "4 walls matched" in screen_text(app))
        await pilot.press("x")
        await until(pilot, lambda: pose.calls == ["stop_activity"])
        await pilot.press("s")
        await until(pilot, lambda: pose.calls[-1:] == ["start_activity"])
        await pilot.press("f")
        await until(pilot, lambda: "40 points, 2.500 m away" in screen_text(app, "#message"), timeout=15.0)
        await type_values(pilot, "p", "1 2 0.5")
        await until(pilot, lambda: "pose set" in screen_text(app, "#message"), timeout=15.0)
        assert pose.calls[-2:] == ["stop_activity", "start_activity"]
        assert posts.snapshot()[-1].pose == [1.0, 2.0, 0.0, 0.5, 0.0, 0.0]
        assert posts.snapshot()[-1].cmd_flags == -1

    run_app(app, script)
    watch.close()


def test_slam_page(make_bus: Callable[[], Bus]) -> None:
    """Start and stop the thread, save the map (the slam/status exchange, then the map service); status in words."""
    from pluto.navigation.slam.module import SAVE, SAVING

    module_bus, app_bus = make_bus(), make_bus()
    saved = {"n": 0}

    def map_reply(_request: object) -> dict[str, object]:
        return {"path": "/tmp/map.xml", "walls": 12, "saved_walls": 12, "saves": saved["n"]}

    slam = StandIn(module_bus, "slam", {names.SLAM_STATUS: status([1, 0, 12, 3, 0])}, {"map": map_reply})

    def answer(value: msgs.FVectorState) -> None:
        if len(value.element) > 1 and value.element[1] == SAVE:
            saved["n"] += 1
            slam.write(names.SLAM_STATUS, status([1, SAVING, 12, 3, saved["n"] - 1]))
            slam.write(names.SLAM_STATUS, status([1, 0, 12, 3, saved["n"]]))

    module_bus.create_subscription(names.SLAM_STATUS, answer, depth=64, current=False)
    app = KeyApp(app_bus, "slam", PARAMS)

    async def script(pilot: Pilot[None]) -> None:
        await connected(pilot, app)
        await until(pilot, lambda: "12 walls in the map" in screen_text(app))
        await pilot.press("s")
        await until(pilot, lambda: slam.calls == ["start_activity"])
        await pilot.press("m")
        await until(pilot, lambda: "map saved: 12 walls in /tmp/map.xml" in screen_text(app, "#message"), timeout=15.0)
        await pilot.press("x")
        await until(pilot, lambda: slam.calls[-1:] == ["stop_activity"])
        await until(pilot, lambda: f"{saved['n']} saves" in screen_text(app))  # a lost request is asked again

    run_app(app, script)


def test_loc_page(make_bus: Callable[[], Bus]) -> None:
    """The five pose interfaces shown; set pose, reset and release post on Localization/Post_Pose."""
    module_bus, app_bus = make_bus(), make_bus()
    poses = {
        n: msgs.PoseEstimate(pose=[float(i), 0.0, 0.0, 0.0, 0.0, 0.0])
        for i, n in enumerate(names.LOCALIZATION_INTERFACES)
    }
    poses[names.LOCALIZATION_POSE] = msgs.PoseEstimate(
        pose=[1.5, -2.0, 0.0, math.pi / 2, 0.0, 0.0], covariance=[0.01, 0, 0, 0, 0.04, 0, 0, 0, 0.0001], cmd_flags=1
    )
    StandIn(module_bus, "localization", poses)
    posts = Commands(module_bus, names.LOCALIZATION_POST_POSE, msgs.PoseEstimate)
    app = KeyApp(app_bus, "loc", PARAMS)

    async def script(pilot: Pilot[None]) -> None:
        await connected(pilot, app)
        await until(pilot, lambda: "(3) Pose: x +1.500" in screen_text(app))
        text = screen_text(app)
        assert "θ +90.0°" in text and "σ 0.100 m 0.200 m" in text and "setter 1 (pose module)" in text
        assert "(4) Laser_Pose: x +4.000" in text and "(0) Dead-Reckoning" in text
        await type_values(pilot, "p", "1 2 0.5")
        posted = await next_command(pilot, posts)
        assert posted.pose == [1.0, 2.0, 0.0, 0.5, 0.0, 0.0] and posted.cmd_flags == -1
        await pilot.press("r")
        reset = await next_command(pilot, posts, after=1)
        assert reset.pose == [0.0] * 6 and reset.cmd_flags == -1
        await pilot.press("z")
        released = await next_command(pilot, posts, after=2)
        assert released.pose == [] and released.cmd_flags == 0

    run_app(app, script)


def test_arm_page(make_bus: Callable[[], Bus]) -> None:
    """Joint steps on the selected joint only (NaN leaves the others), joint choice, and Space holds the arm."""
    module_bus, app_bus = make_bus(), make_bus()
    arm = StandIn(module_bus, "arm", {names.ARM_STATE: msgs.ActuatorState(position=[0.0, 0.5, -0.5, 0.0])})
    commands = Commands(module_bus, names.ARM_COMMAND, msgs.ActuatorState)
    app = KeyApp(app_bus, "arm", PARAMS)

    async def script(pilot: Pilot[None]) -> None:
        await connected(pilot, app)
        await until(pilot, lambda: "1 joint 1: +28.6°" in screen_text(app))
        await pilot.press("up")
        first = await next_command(pilot, commands)
        assert first.position[0] == pytest.approx(math.radians(5.0)) and all(math.isnan(v) for v in first.position[1:])
        await pilot.press("right", "down")
        second = await next_command(pilot, commands, after=1)
        assert math.isnan(second.position[0]) and second.position[1] == pytest.approx(0.5 - math.radians(5.0))
        arm.write(names.ARM_STATE, msgs.ActuatorState(position=[0.1, 0.45, -0.5, 0.0]))
        await until(pilot, lambda: "  0 joint 0: +5.7°" in screen_text(app) and "▶ 1 joint 1" in screen_text(app))
        await pilot.press("space")
        hold = await next_command(pilot, commands, after=2)
        assert hold.position == pytest.approx([0.1, 0.45, -0.5, 0.0])

    run_app(app, script)


def test_pages_switch_and_wait_for_their_module(make_bus: Callable[[], Bus]) -> None:
    """F-keys switch pages; a page whose module is not running says so, and connects once it comes."""
    module_bus, app_bus = make_bus(), make_bus()
    StandIn(module_bus, "drive", {names.DRIVE_STATUS: status([0])})
    commands = Commands(module_bus, names.DRIVE_COMMAND, msgs.ActuatorState)
    motion_commands = Commands(module_bus, names.MOTION_COMMAND, msgs.ActuatorState)
    app = KeyApp(app_bus, "drive", PARAMS, connect_timeout=0.5)

    async def script(pilot: Pilot[None]) -> None:
        await connected(pilot, app)
        await pilot.press("f3")
        assert app.page.name == "motion"
        await until(pilot, lambda: "waiting for the motion module" in screen_text(app))
        await pilot.press("i")
        await until(pilot, lambda: "not connected to motion yet" in screen_text(app, "#message"))
        StandIn(module_bus, "motion", {names.MOTION_STATUS: status([0, 0, 1, 0])})
        await connected(pilot, app)
        await until(pilot, lambda: "at the goal" in screen_text(app), timeout=15.0)
        await pilot.press("f1", "up")
        await until(pilot, lambda: app.page.name == "drive" and app.link.connected)
        await pilot.press("up")
        await next_command(pilot, commands, lambda c: c.velocity[0] > 0)
        assert motion_commands.snapshot() == []  # leaving the motion page did not stop the motion

    run_app(app, script)

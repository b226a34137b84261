"""The simulated robot recorded: readers give what the live interfaces and proxies gave, and the localization
service run again on the replayed log gives what it gave live.

The simulated robot runs in lock-step, driven by a script that takes part in it, so the recorded run is the same on
every run of the test."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
from pluto.proxies import LocProxy
from pluto.record.logfile import LogFile
from pluto.record.readers import BaseReader, DmuReader, GpsReader, LocReader, SickReader
from pluto.record.recorder import Recorder
from pluto.record.replay import Replayer
from tests.helpers import wait_until
from tests.record.conftest import ClockAfterReplay
from tests.scenarios.stack import ROOM, Collector, Lockstep, Script

SENSORS = {
    "Base/Drive/State": msgs.Odometry,
    "Sick/Scan_mm": msgs.LaserScan,
    "DMU/State": msgs.DmuState,
    "GPS/State": msgs.GpsFix,
    "Localization/Dead-Reckoning": msgs.PoseEstimate,
    "Localization/Laser_Dead-Reckoning": msgs.PoseEstimate,
}


def in_order_within(values: Sequence[Any], series: Sequence[Any]) -> bool:
    """True if ``values`` all appear in ``series``, in the same order."""
    position = 0
    for value in values:
        try:
            position = series.index(value, position) + 1
        except ValueError:
            return False
    return True


@pytest.mark.scenario
def test_readers_and_localization_on_a_recorded_run(tmp_path: Path, bus: Bus, make_bus: Callable[..., Bus]) -> None:
    world = tmp_path / "room.xml"
    world.write_text(ROOM.replace('x="5" y="5"', 'x="3" y="3"'))
    path = tmp_path / "run.mcap"
    live = {name: Collector(bus, name, cls) for name, cls in SENSORS.items()}
    recorder = Recorder(bus, path, time_base="sim")  # on the stack's session: the network drops nothing
    recorder.start()
    proxy_values: list[msgs.PoseEstimate] = []
    proxies: list[LocProxy] = []
    found: dict[str, Any] = {}

    def drive(now: float) -> Generator[None, float, None]:
        while now < 0.5:  # the proxy waits until every pose interface has a value (after the first scans)
            now = yield
        proxy = LocProxy(bus, 0b11, start=False, timeout=5.0)
        proxies.append(proxy)
        now = yield  # its readers are up to date from the next step on
        # drive, and note what a client of the proxy sees along the way
        while (moving := odometry.read()) is None or moving.x <= 0.0:
            command.write(msgs.ActuatorState(velocity=[0.4, 0.3]))
            now = yield
        while True:
            command.write(msgs.ActuatorState(velocity=[0.4, 0.3]))
            pose = proxy.get_pose(0)
            if pose is not None and (not proxy_values or pose != proxy_values[-1]):
                proxy_values.append(pose)
            if pose is not None and pose.stamp > moving.stamp + 4.0:
                break
            now = yield
        found["live_now"] = proxy.get_pose(1)

    world = tmp_path / "room.xml"
    world.write_text(ROOM.replace('x="5" y="5"', 'x="3" y="3"'))
    with Lockstep(bus) as sim:
        sim.start(world=str(world), noise="ideal")
        script = Script(bus, run=drive, rate_hz=50.0)
        command = script.publisher("Base/Drive/Command", msgs.ActuatorState)
        odometry = script.reader("Base/Drive/State", msgs.Odometry)
        sim.add(script)
        sim.resume()
        try:
            script.wait()
        finally:
            for proxy in proxies:
                proxy.close()
        start = live["Base/Drive/State"].values[0].stamp
    live_now = found["live_now"]

    def recorded_all() -> bool:
        counts = {i.name: i.count for i in recorder.status().interfaces}
        return all(counts.get(name, 0) >= len(values.snapshot()) for name, values in live.items())

    wait_until(recorded_all, timeout=10)
    status = recorder.stop()
    log = LogFile(path)
    first = log.series("Base/Drive/State")[0].message
    assert isinstance(first, msgs.Odometry) and first.stamp <= start  # the log has the run from its beginning

    # readers give the same values as the live interfaces, in the same order
    pairs = [
        (list(BaseReader(log).odometry()), "Base/Drive/State"),
        (list(SickReader(log).scans()), "Sick/Scan_mm"),
        (list(DmuReader(log).states()), "DMU/State"),
        (list(GpsReader(log).fixes()), "GPS/State"),
    ]
    assert status.lost == 0
    for from_file, name in pairs:
        assert from_file == live[name].snapshot(), name
    # ... and what the live proxy returned
    loc = LocReader(log)
    recorded_poses = [m.message for m in loc.messages(0)]
    assert in_order_within(proxy_values, recorded_poses)
    assert live_now is not None and live_now in [m.message for m in loc.messages(1)]
    written = next(m for m in loc.messages(0) if m.message == proxy_values[-1])
    loc.seek(written.log_time)  # at the time the live proxy got it, the reader has it too
    # (in lock-step the log's time is that of the newest Clock, which comes every 50 ms of simulated time: the poses
    # of the steps in between share it, and the reader has the last of them)
    same_time = [m.message for m in loc.messages(0) if m.log_time == written.log_time]
    assert loc.get_pose(0) == same_time[-1]
    assert same_time.index(proxy_values[-1]) >= len(same_time) - 3

    _check_localization_replayed(log, bus, make_bus)


def _check_localization_replayed(log: LogFile, bus: Bus, make_bus: Callable[..., Bus]) -> None:
    """The localization service again, on the replayed sensors, gives what it gave live (in a session of its own, as
    a new process would: the live run's session followed the lock-step)."""
    wait_until(lambda: "base" not in bus.live_modules(), timeout=10)
    session = make_bus()
    # the live service started at the world's start (the profile's start_from_sim); no sim here to ask: given
    again = LocalizationModule(session, LocalizationModuleParams(use_sim_time=True, start_pose=[3.0, 3.0, 0.0]))
    dead_reckoning = Collector(session, "Localization/Dead-Reckoning", msgs.PoseEstimate)
    laser = Collector(session, "Localization/Laser_Dead-Reckoning", msgs.PoseEstimate)
    again.start()
    try:
        inputs = ["Base/Drive/State", "DMU/State", "Wrist/State", "Sick/Timing"]
        # the log's clock runs on past its end until the service has integrated the last odometry: one that got it
        # late (a busy machine) still sees the flush wait pass on its clock and integrates the samples that wait for
        # inertial data
        clock = ClockAfterReplay(session)
        replayer = Replayer(make_bus(), log, rate=10.0, only=inputs)
        replayer.run()
        last = log.series("Base/Drive/State")[-1].message.stamp  # type: ignore[attr-defined]
        clock.run_until(replayer, lambda: any(p.stamp >= last for p in dead_reckoning.snapshot()))
    finally:
        again.stop()
    _compare_replayed("Localization/Dead-Reckoning", dead_reckoning.snapshot(), log)
    _compare_replayed("Localization/Laser_Dead-Reckoning", laser.snapshot(), log)


def _compare_replayed(name: str, replayed: list[msgs.PoseEstimate], log: LogFile) -> None:
    """The poses of interface ``name`` the replay gave against those of the live run, at the same stamps."""
    original = {round(m.message.stamp, 6): m.message for m in log.series(name)}  # type: ignore[attr-defined]
    # the clock runs on past the log's end until the service has integrated the last odometry (longer on a busy
    # machine), and the service writes a pose at each of those ticks: compare the poses within the log's time
    within = [pose for pose in replayed if round(pose.stamp, 6) <= max(original)]
    matched = []
    for pose in within:
        before = original.get(round(pose.stamp, 6))
        if before is not None:
            matched.append((pose, before))
    # one laser pose per scan; one robot pose per step of the service, whose stamps depend on its batches: live
    # (in lock-step) it stepped at every odometry value, replayed on the wall clock as often as the machine lets
    # it, so most of the replayed poses have a live one of the same stamp, and enough to compare
    if name == "Localization/Laser_Dead-Reckoning":
        assert len(matched) >= 0.9 * len(original), name
    else:
        assert len(matched) >= max(20, 0.8 * len(within)), name
    for pose, before in matched:
        # the same inputs in the same order, but not in the same batches of the service's steps: an inertial
        # state (stamped 0.1 s late) that came in the step after an odometry value live may come in the same
        # step in the replay, and the heading is then interpolated rather than extrapolated at the filtered
        # rate (up to about 0.02 rad while the turn rate changes)
        assert list(pose.pose) == pytest.approx(list(before.pose), abs=0.03), (name, pose.stamp)
    if name == "Localization/Laser_Dead-Reckoning":
        # the covariance of the increment between scans (the first scan's runs from the start, which the
        # replayed service saw earlier than the live one: it got the log from its first odometry); a step
        # taken on the odometry's heading live may take the inertial heading in the replay (the same batching
        # as above), which changes the heading variance by the gyro's noise over a step (under 2e-6 rad²)
        for pose, before in matched[1:]:
            assert list(pose.covariance) == pytest.approx(list(before.covariance), rel=0.1, abs=5e-6)

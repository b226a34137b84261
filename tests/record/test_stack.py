"""The simulated robot recorded: readers give what the live interfaces and proxies gave, and the localization
service run again on the replayed log gives what it gave live."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile, with_params
from pluto.runtime.supervisor import Supervisor
from tests.helpers import wait_until
from tests.scenarios.stack import ROOM, Collector, Commander

RATE = 5.0
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


def test_readers_and_localization_on_a_recorded_run(tmp_path: Path, bus: Bus, make_bus: Callable[..., Bus]) -> None:
    world = tmp_path / "room.xml"
    world.write_text(ROOM.replace('x="5" y="5"', 'x="3" y="3"'))
    path = tmp_path / "run.mcap"
    live = {name: Collector(bus, name, cls) for name, cls in SENSORS.items()}
    recorder = Recorder(bus, path, time_base="sim")  # on the stack's session: the network drops nothing
    recorder.start()
    profile = with_params(load_profile("sim"), "sim", world=str(world), rate=RATE, noise="ideal")
    supervisor = Supervisor(bus, profile, Config(), one_process=True)
    proxy_values: list[msgs.PoseEstimate] = []
    try:
        supervisor.start()
        proxy = LocProxy(bus, 0b11, start=False)
        odometry = live["Base/Drive/State"]
        start = odometry.wait_for(lambda _o: True).stamp
        with Commander(bus, 0.4, 0.3):
            moving = odometry.wait_for(lambda o: o.x > 0.0, timeout=20)
            while True:  # what a client of the proxy sees along the way
                proxy_values.append(proxy.wait_pose(0, timeout=10))
                if proxy_values[-1].stamp > moving.stamp + 4.0:
                    break
        live_now = proxy.get_pose(1)
        proxy.close()
    finally:
        supervisor.shutdown()

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
    assert loc.get_pose(0) == proxy_values[-1]

    # the localization service again, on the replayed sensors, gives what it gave live
    wait_until(lambda: "base" not in bus.live_modules(), timeout=10)
    again = LocalizationModule(bus, LocalizationModuleParams(use_sim_time=True))
    dead_reckoning = Collector(bus, "Localization/Dead-Reckoning", msgs.PoseEstimate)
    laser = Collector(bus, "Localization/Laser_Dead-Reckoning", msgs.PoseEstimate)
    again.start()
    try:
        inputs = ["Base/Drive/State", "DMU/State", "Wrist/State", "Sick/Timing"]
        Replayer(make_bus(), log, rate=10.0, only=inputs).run()
        last = log.series("Base/Drive/State")[-1].message.stamp  # type: ignore[attr-defined]
        dead_reckoning.wait_for(lambda p: p.stamp >= last, timeout=10)
    finally:
        again.stop()
    for name, replayed in (
        ("Localization/Dead-Reckoning", dead_reckoning),
        ("Localization/Laser_Dead-Reckoning", laser),
    ):
        original = {round(m.message.stamp, 6): m.message for m in log.series(name)}  # type: ignore[attr-defined]
        matched = []
        for pose in replayed.snapshot():
            before = original.get(round(pose.stamp, 6))
            if before is not None:
                matched.append((pose, before))
        # one laser pose per scan; one robot pose per step of the service, whose stamps depend on its batches
        assert len(matched) >= (0.9 if name == "Localization/Laser_Dead-Reckoning" else 0.3) * len(original), name
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

"""Import of CARMEN logs: lines parse or are reported with their numbers; both public data sets import, replay
through the localization service, and plot."""

from __future__ import annotations

import gzip
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.navigation.localization.core import DeadReckoning
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
from pluto.record.carmen import (
    CarmenImport,
    CarmenLaser,
    CarmenLineError,
    CarmenOdometry,
    CarmenRawLaser,
    beam_angles,
    import_carmen,
    parse_line,
)
from pluto.record.format import LogError
from pluto.record.logfile import LogFile
from pluto.record.plot import plot_log
from pluto.record.replay import Replayer
from tests.record.conftest import EXCERPTS, ClockAfterReplay


def flaser(n: int, t: float, ranges: str | None = None, kind: str = "FLASER") -> str:
    values = ranges if ranges is not None else " ".join(["1.5"] * n)
    return f"{kind} {n} {values} 1 2 0.5 1 2 0.5 {t} host {t}"


def robotlaser(ranges: str, t: float, remissions: str = "0", kind: str = "ROBOTLASER1") -> str:
    """A ``ROBOTLASER`` line: a SICK (type 0) from -90° every 1°, 81.9 m, the laser 0.1 m ahead of the robot."""
    n = len(ranges.split())
    return (
        f"{kind} 0 -1.5708 3.1416 0.0174533 81.9 0.01 0 {n} {ranges} {remissions} "
        f"1.1 2 0.5 1 2 0.5 0.3 0.1 0.5 0.2 0 {t} host {t}"
    )


def rawlaser(ranges: str, t: float, remissions: str = "0", kind: str = "RAWLASER1") -> str:
    """A ``RAWLASER`` line: a Hokuyo (type 2) from -2 rad every 0.01 rad, 5.6 m."""
    n = len(ranges.split())
    return f"{kind} 2 -2.0 4.0 0.01 5.6 0.01 0 {n} {ranges} {remissions} {t} host {t}"


# -- lines --------------------------------------------------------------------------------------------------------


def test_odometry_line() -> None:
    item = parse_line("ODOM 1.5 -2 0.25 0.3 -0.1 0 12.5 pippo 12.5\n", 7)
    assert item == CarmenOdometry(7, 12.5, 1.5, -2.0, 0.25, 0.3, -0.1)


def test_laser_lines_and_their_beams() -> None:
    item = parse_line(flaser(180, 3.0), 1)
    assert isinstance(item, CarmenLaser) and not item.rear and len(item.ranges) == 180
    assert (item.t, item.pose, item.odometry) == (3.0, (1.0, 2.0, 0.5), (1.0, 2.0, 0.5))
    rear = parse_line(flaser(3, 4.0, "1 2 3", "RLASER"), 2)
    assert isinstance(rear, CarmenLaser) and rear.rear and rear.ranges == (1.0, 2.0, 3.0)
    assert beam_angles(180)[0] == -math.pi / 2 and beam_angles(180)[90] == pytest.approx(0.0)
    assert beam_angles(361)[-1] == pytest.approx(math.pi / 2) and beam_angles(360)[180] == pytest.approx(0.0)
    assert beam_angles(5) == pytest.approx([-math.pi / 2, -math.pi / 4, 0.0, math.pi / 4, math.pi / 2])


def test_robotlaser_lines_give_their_beams_poses_and_range() -> None:
    item = parse_line(robotlaser("1 2 3", 7.5, "3 10 20 30"), 4)
    assert isinstance(item, CarmenLaser) and item.kind == "ROBOTLASER1" and not item.rear
    assert (item.line, item.t, item.ranges) == (4, 7.5, (1.0, 2.0, 3.0))
    # the laser's pose, then the robot's (odometry) pose; the remission values are left out
    assert item.pose == (1.1, 2.0, 0.5) and item.odometry == (1.0, 2.0, 0.5)
    assert item.max_range == 81.9 and item.angles() == pytest.approx(
        [-1.5708, -1.5708 + 0.0174533, -1.5708 + 2 * 0.0174533]
    )
    rear = parse_line(robotlaser("1 2", 8.0, kind="ROBOTLASER2"), 5)
    assert isinstance(rear, CarmenLaser) and rear.rear and rear.kind == "ROBOTLASER2"
    # an FLASER keeps the bearings of its convention
    front = parse_line(flaser(5, 1.0), 1)
    assert (
        isinstance(front, CarmenLaser) and front.angles() == pytest.approx(beam_angles(5)) and front.max_range is None
    )


def test_rawlaser_lines_give_a_scan_without_a_pose() -> None:
    item = parse_line(rawlaser("0.5 0.6 0.7 0.8", 3.25, "2 100 200"), 9)
    assert item == CarmenRawLaser(9, 3.25, "RAWLASER1", 1, (0.5, 0.6, 0.7, 0.8), -2.0, 0.01, 5.6)
    assert item.angles() == pytest.approx([-2.0, -1.99, -1.98, -1.97])
    other = parse_line(rawlaser("1 2", 4.0, kind="RAWLASER3"), 10)
    assert isinstance(other, CarmenRawLaser) and other.number == 3


def test_the_import_counts_the_newer_lasers_lines_and_leaves_them_out() -> None:
    converter = CarmenImport()
    converter.feed_lines(
        [flaser(3, 1.0, "1 2 3"), robotlaser("1 2 3", 1.0), rawlaser("1 2 3", 1.0), rawlaser("1 2", 1.0)]
    )
    converter.messages()
    assert converter.report.counts == {"Sick/Scan_mm": 1, "Sick/Timing": 1}
    assert converter.report.ignored == {"RAWLASER1": 2, "ROBOTLASER1": 1} and not converter.report.malformed


def test_other_lines() -> None:
    assert parse_line("", 1) is None and parse_line("   \n", 1) is None
    assert parse_line("# message formats defined: ODOM", 1) is None
    assert parse_line("SYNC 1 2 3", 1) == "SYNC" and parse_line("NEFF 10", 1) == "NEFF"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("ODOM 1 2 3 0 0 0 5.0 host", "9 values"),
        ("ODOM 1 two 3 0 0 0 5.0 host 5.0", "y is not a number"),
        ("ODOM 1 2 nan 0 0 0 5.0 host 5.0", "theta is not finite"),
        ("FLASER", "without the number"),
        ("FLASER x 1 2", "not an integer"),
        ("FLASER 0 1 2 0.5 1 2 0.5 5.0 h 5.0", "0 ranges"),
        ("FLASER 20000 1", "20000 ranges"),
        (flaser(180, 3.0).replace(" 1.5", "", 1), "cut short"),
        (flaser(3, 3.0, "1 oops 3"), "range 2 is not a number"),
        ("PARAM lonely", "PARAM without"),
        ("ROBOTLASER1 0 -1.57 3.14 0.017", "cut short before its ranges"),
        (robotlaser("1 2 3", 5.0).replace(" 3 0 1.1", " 3 1.1"), "remission values is not an integer"),
        (robotlaser("1 2 3", 5.0, "2 7"), "3 ranges and 2 remission values"),
        (robotlaser("1 2 3", 5.0).replace("-1.5708", "left"), "start_angle is not a number"),
        (robotlaser("1 2 3", 5.0).replace(" 0.2 0 5.0", " 0.2 0 inf"), "timestamp is not finite"),
        (rawlaser("1 2", 5.0).replace(" 2 1 2 ", " two 1 2 "), "number of ranges is not an integer"),
        ("RAWLASER1 2 -2.0 4.0 0.01 5.6 0.01 0 0 0 5.0 h 5.0", "no range"),
        (rawlaser("1 2", 5.0).replace(" 0 5.0 host", " -1 5.0 host"), "-1 remission values"),
        (rawlaser("1 2", 5.0) + " 6.0", "cut short"),
    ],
)
def test_malformed_lines_say_why(text: str, reason: str) -> None:
    with pytest.raises(CarmenLineError, match=reason):
        parse_line(text, 1)


# -- a log ----------------------------------------------------------------------------------------------------------

LOG = "\n".join(
    [
        "# a hand-made log",  # 1
        "PARAM robot_frontlaser_offset 0.1 nohost 0",  # 2
        "ODOM 0 0 3.1 0 0 0 1.0 h 1.0",  # 3
        "ODOM 0.1 0 -3.1 0 0 0 1.1 h 1.1",  # 4: crosses +-pi
        flaser(4, 1.1, "1 2 3 4"),  # 5
        "ODOM 0 0 0 0 0 0 0 h 0",  # 6: a copy with no timestamp
        "ODOM 0.2 0 -3.0 0 0 0 1.25 h 1.25",  # 7: jitter: before line 8 in time
        "ODOM 0.3 0 -3.0 0 0 0 1.2 h 1.2",  # 8
        "ODOM 0.4 0 garbage 0 0 0 1.3 h 1.3",  # 9: malformed
        "ODOM 0.5 0 -3.0 0 0 0 0.05 h 0.05",  # 10: far back in time
        flaser(2, 1.35, "5 6", "RLASER"),  # 11
        "TRUEPOS 1 2 3 1 2 3 1.4 h 1.4",  # 12
        "FLASER 3 1 2 1 2 0.5 1 2 0.5 1.4 h 1.4",  # 13: cut short
        "ODOM 0.6 0 -3.0 0 0 0 1.5 h 1.5",  # 14
    ]
)


def test_a_log_with_problems_imports_what_is_good_and_names_the_rest() -> None:
    converter = CarmenImport(max_backstep=1.0)
    converter.feed_lines(LOG.splitlines())
    out = converter.messages()
    report = converter.report
    assert report.lines == 14 and report.params == {"robot_frontlaser_offset": "0.1"}
    assert [(p.line, p.reason.split(":")[0]) for p in report.malformed] == [
        (9, "theta is not a number"),
        (13, "FLASER with 3 ranges has 13 values after its name, got 12 (cut short?)"),
    ]
    assert [p.line for p in report.out_of_order] == [6, 10]
    assert "no timestamp" in report.out_of_order[0].reason and "before the newest" in report.out_of_order[1].reason
    assert report.ignored == {"TRUEPOS": 1}
    assert report.counts == {"Base/Drive/State": 5, "Sick/Rear/Scan_mm": 1, "Sick/Scan_mm": 1, "Sick/Timing": 1}
    assert [t for _name, _msg, t in out] == sorted(t for _name, _msg, t in out)
    odometry = [m for name, m, _t in out if isinstance(m, msgs.Odometry)]
    assert [o.x for o in odometry] == [0.0, 0.1, 0.3, 0.2, 0.6]  # in time order
    # the heading is continuous across +-pi
    assert [o.theta for o in odometry] == pytest.approx(
        [3.1, 2 * math.pi - 3.1, 2 * math.pi - 3.0] + [2 * math.pi - 3.0] * 2
    )
    scan = next(m for name, m, _t in out if name == "Sick/Scan_mm")
    assert isinstance(scan, msgs.LaserScan)
    assert (scan.stamp, scan.ranges, scan.count, scan.max_range) == (1.1, [1.0, 2.0, 3.0, 4.0], 4, 80.0)
    assert scan.angles == pytest.approx(beam_angles(4))
    assert report.start == 1.0 and report.end == 1.5


def test_import_of_a_file(tmp_path: Path) -> None:
    source = tmp_path / "hand.log"
    source.write_text(LOG)
    report = import_carmen(source, tmp_path / "hand.mcap", robot="handmade")
    assert report.output == tmp_path / "hand.mcap" and report.skipped == 4
    log = LogFile(tmp_path / "hand.mcap")
    assert log.info["robot"] == "handmade" and log.info["source"] == "carmen" and log.info["laser_offset_x"] == "0.1"
    assert {n: c.count for n, c in log.channels.items()} == report.counts
    with pytest.raises(LogError, match="exists"):
        import_carmen(source, tmp_path / "hand.mcap")
    (tmp_path / "broken.log.gz").write_bytes(gzip.compress(LOG.encode())[:-20])
    with pytest.raises(LogError, match="cannot read"):
        import_carmen(tmp_path / "broken.log.gz", tmp_path / "broken.mcap")
    with pytest.raises(LogError, match="cannot read"):
        import_carmen(tmp_path / "missing.log", tmp_path / "missing.mcap")


# -- the public data sets -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "beams", "offset"), [("intel", 180, "0.0"), ("freiburg", 360, "-0.04")])
def test_the_public_data_sets_import_replay_through_localization_and_plot(
    name: str,
    beams: int,
    offset: str,
    carmen_log: Callable[[str], Path],
    tmp_path: Path,
    bus: Bus,
    make_bus: Callable[..., Bus],
) -> None:
    lines = gzip.decompress(EXCERPTS[name].read_bytes()).decode().splitlines()
    scans_in_text = sum(1 for line in lines if line.startswith("FLASER"))
    log = LogFile(carmen_log(name))
    assert log.closed and log.info["laser_offset_x"] == offset
    assert log.channels["Sick/Scan_mm"].count == log.channels["Sick/Timing"].count == scans_in_text
    assert all(len(s.message.ranges) == beams for s in log.series("Sick/Scan_mm"))  # type: ignore[attr-defined]
    odometry = [m.message for m in log.series("Base/Drive/State") if isinstance(m.message, msgs.Odometry)]
    stamps = [o.stamp for o in odometry]
    assert stamps == sorted(stamps) and stamps[0] > 0

    localization = LocalizationModule(bus, LocalizationModuleParams(use_sim_time=True))
    poses: list[msgs.PoseEstimate] = []
    bus.create_subscription("Localization/Dead-Reckoning", poses.append, msgs.PoseEstimate, depth=4096)
    clock = ClockAfterReplay(bus)
    localization.start()
    try:
        replayer = Replayer(make_bus(), log, rate=50.0)
        result = replayer.run()
        clock.run_until(replayer, lambda: bool(poses) and poses[-1].stamp == stamps[-1])
    finally:
        localization.stop()
    assert result.messages == log.message_count
    core = DeadReckoning(localization.core.params)
    for o in odometry:
        core.add_odometry(o.stamp, o.x, o.y, o.theta)
    assert list(poses[-1].pose) == pytest.approx(list(core.pose().pose), abs=1e-9)

    picture = plot_log(log, tmp_path / f"{name}.png")
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 20_000

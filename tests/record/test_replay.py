"""Replay: the schedule, and on the bus: a record -> replay -> record round trip gives the same messages at the same
times; --only, --remap; the log's Clock drives the localization service in step."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.errors import PlutoError
from pluto.navigation.localization.core import DeadReckoning
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
from pluto.record.logfile import LogFile, LoggedMessage
from pluto.record.recorder import Recorder
from pluto.record.replay import Replayer, ReplaySchedule, parse_remap, shift_stamps
from pluto.record.writer import LogWriter
from pluto.runtime import mom
from tests.helpers import wait_until
from tests.record.robot import FakeRobot

# -- the schedule ---------------------------------------------------------------------------------------------------


def entries(*times: float) -> list[LoggedMessage]:
    return [LoggedMessage("Heartbeat", t, 0.0, i + 1, msgs.Heartbeat(stamp=t, seq=i + 1)) for i, t in enumerate(times)]


def test_clock_values_between_and_before_each_message() -> None:
    events = list(ReplaySchedule(entries(10.0, 10.25, 10.3), clock_period=0.1).events())
    assert [(round(e.t, 6), e.message is not None) for e in events] == [
        (10.0, True),
        (10.1, False),
        (10.2, False),
        (10.25, True),
        (10.3, True),
    ]
    assert [e.t for e in ReplaySchedule(entries(1.0, 2.0)).events()] == [1.0, 2.0]  # no clock: messages only
    tail = [e.t for e in ReplaySchedule(entries(1.0), clock_period=0.25, tail=0.6).events()]
    assert tail == pytest.approx([1.0, 1.25, 1.5])  # the clock runs on a little after the last message


def test_a_loop_moves_each_pass_and_its_stamps_on() -> None:
    schedule = ReplaySchedule(entries(10.0, 11.0), clock_period=0.5, loop=True)
    events = []
    for event in schedule.events():
        if event.message is not None:
            events.append(event)
        if len(events) == 6:
            break
    times = [e.t for e in events]
    assert times == pytest.approx([10.0, 11.0, 11.5, 12.5, 13.0, 14.0])
    stamps = [e.message.stamp for e in events if isinstance(e.message, msgs.Heartbeat)]
    assert stamps == pytest.approx(times)  # time never runs backwards, stamps move with it
    scan = shift_stamps(msgs.LaserScan(stamp=1.0, arrival=1.2, ranges=[1.0]), 10.0)
    assert isinstance(scan, msgs.LaserScan) and (scan.stamp, scan.arrival, scan.ranges) == (11.0, 11.2, [1.0])


def test_each_pass_of_a_loop_is_numbered() -> None:
    schedule = ReplaySchedule(entries(10.0, 11.0), clock_period=0.5, loop=True)
    events = []
    for event in schedule.events():
        events.append(event)
        if len(events) == 9:
            break
    assert [(round(e.t, 6), e.lap) for e in events] == [
        (10.0, 0),
        (10.5, 0),
        (11.0, 0),
        (11.5, 1),
        (12.0, 1),
        (12.5, 1),
        (13.0, 2),
        (13.5, 2),
        (14.0, 2),
    ]
    assert {e.lap for e in ReplaySchedule(entries(1.0, 2.0), clock_period=0.25, tail=0.6).events()} == {0}


def test_remap_pairs() -> None:
    assert parse_remap(["Sick/Scan_mm=Rear/Scan_mm"]) == {"Sick/Scan_mm": "Rear/Scan_mm"}
    for bad in ("Sick/Scan_mm", "=B", "A=", "A=B*"):
        with pytest.raises(PlutoError):
            parse_remap([bad])


def test_options_are_checked(tmp_path: Path, bus: Bus) -> None:
    path = tmp_path / "log.mcap"
    with LogWriter(path) as writer:
        for t in (1.0, 2.0, 3.0, 4.0):
            writer.add("Base/Drive/State", msgs.Odometry(stamp=t), t)
            writer.add("GPS/State", msgs.GpsFix(stamp=t), t)
    part = Replayer(bus, path, start=1.0, end=2.5, only=["Base/*"])
    assert [e.log_time for e in part.schedule.entries] == [2.0, 3.0]
    assert part.names == ["Base/Drive/State"]
    with pytest.raises(PlutoError, match="no interface matching"):
        Replayer(bus, path, only=["Sick/*"])
    with pytest.raises(PlutoError, match="carries Odometry"):
        Replayer(bus, path, remap={"GPS/State": "Base/Drive/State"})
    with pytest.raises(PlutoError, match="not replayed"):
        Replayer(bus, path, only=["GPS/*"], remap={"Base/Drive/State": "Odometry/Other"})
    with pytest.raises(PlutoError, match="rate"):
        Replayer(bus, path, rate=0.0)
    with pytest.raises(PlutoError, match="before --start"):
        Replayer(bus, path, start=2.0, end=1.0)


# -- on the bus -----------------------------------------------------------------------------------------------------


def test_each_pass_of_a_loop_is_a_new_run_on_the_clock(tmp_path: Path, bus: Bus, make_bus: Callable[..., Bus]) -> None:
    """A loop's times keep rising, so only the ``run`` id of its ``Clock`` values tells modules that it started
    again (and a replay started again is a new run too)."""
    path = tmp_path / "short.mcap"
    with LogWriter(path) as writer:
        for t in (1.0, 1.1, 1.2):
            writer.add("Base/Drive/State", msgs.Odometry(stamp=t), t)
    ticks: list[msgs.SimTime] = []
    lock = threading.Lock()

    def on_tick(tick: msgs.SimTime) -> None:
        with lock:
            ticks.append(tick)

    def runs() -> list[int]:
        with lock:
            return list(dict.fromkeys(t.run for t in ticks))

    bus.create_subscription("Clock", on_tick, msgs.SimTime, depth=4096, current=False)
    replayer = Replayer(make_bus(), path, rate=2.0, loop=True, announce=False)
    stop = threading.Event()
    thread = threading.Thread(target=replayer.run, args=(stop,))
    thread.start()
    try:
        wait_until(lambda: len(runs()) >= 3, timeout=10)
    finally:
        stop.set()
        thread.join(timeout=10)
    with lock:
        seen = list(ticks)
    assert all(t.run != 0 for t in seen)
    stamps = [t.stamp for t in seen]
    assert stamps == sorted(stamps)  # the loop's times rise: the run id alone marks each new pass
    pass_length = 0.2 + 1.0 / 100.0 * 2.0  # the log's span plus one clock period (clock_hz 100 at rate 2)
    for a, b in itertools.pairwise(seen):
        same_pass = int((a.stamp - 1.0 + 1e-6) // pass_length) == int((b.stamp - 1.0 + 1e-6) // pass_length)
        assert (a.run == b.run) == same_pass, (a, b)
    once = Replayer(make_bus(), path, rate=20.0, announce=False)
    before = set(runs())
    once.run()
    wait_until(lambda: len(runs()) > len(before), timeout=10)
    assert len(set(runs()) - before) == 1  # another replay: a run of its own


@pytest.fixture
def recorded(tmp_path: Path, bus: Bus, make_bus: Callable[..., Bus]) -> Path:
    """About a second of the stand-in robot on simulated time (at real-time pace), recorded."""
    path = tmp_path / "original.mcap"
    with FakeRobot(make_bus(), rate=1.0, start=100.0) as robot:
        wait_until(lambda: "Sick/Scan_mm" in robot.snapshot(), timeout=10)
        with Recorder(bus, path) as recorder:
            wait_until(lambda: recorder.status().messages >= 150, timeout=20)
    return path


def by_name(log: LogFile) -> dict[str, list[LoggedMessage]]:
    return {name: log.series(name) for name in log.names()}


def test_record_replay_record_gives_the_same_messages_at_the_same_times(
    recorded: Path, tmp_path: Path, bus: Bus, make_bus: Callable[..., Bus]
) -> None:
    """The same messages, in the same order, at the same log times (within one period of the replayed clock,
    whatever the load: the recorder times a write by the ``Clock`` value written just before it, and never past the
    one after it), and each sent when due on the wall clock, as late as the replay says at most (a busy machine
    delays some; lateness does not add up)."""
    original = by_name(LogFile(recorded))
    again = tmp_path / "again.mcap"
    with Recorder(bus, again, time_base="sim") as recorder:
        replayer = Replayer(make_bus(), recorded)  # a bus opened after the recorder's: it knows its subscriber
        result = replayer.run()
        wait_until(lambda: recorder.status().messages == result.messages, timeout=60)
    replayed = by_name(LogFile(again))
    assert set(replayed) == set(original)
    assert result.messages == sum(len(v) for v in original.values())
    for name, first in original.items():
        assert [m.message for m in replayed[name]] == [m.message for m in first], name
    pairs = [(a, b) for name in original for a, b in zip(original[name], replayed[name], strict=True)]
    period = replayer.schedule.clock_period
    for a, b in pairs:
        assert -1e-6 <= b.log_time - a.log_time <= period + 1e-6, (a.name, a.log_time, b.log_time)
    pairs.sort(key=lambda pair: pair[0].log_time)
    t0, w0 = pairs[0][0].log_time, pairs[0][1].publish_time
    late = [(b.publish_time - w0) - (a.log_time - t0) for a, b in pairs]
    assert max(abs(x) for x in late) <= result.max_late + 0.002, (max(late), min(late), result.max_late)


def test_only_and_remap(recorded: Path, tmp_path: Path, bus: Bus, make_bus: Callable[..., Bus]) -> None:
    out = tmp_path / "only.mcap"
    with Recorder(bus, out, time_base="sim", names=["*"]) as recorder:
        replayer = Replayer(make_bus(), recorded, rate=5.0, only=["Sick/*"], remap={"Sick/Scan_mm": "Rear/Scan_mm"})
        result = replayer.run()
        try:
            wait_until(lambda: recorder.status().messages == result.messages, timeout=60)
        except AssertionError as err:
            raise AssertionError(f"{err}: {result} {recorder.status()}") from None
    original, replayed = by_name(LogFile(recorded)), by_name(LogFile(out))
    assert set(replayed) == {"Rear/Scan_mm", "Sick/Timing"}
    assert [m.message for m in replayed["Rear/Scan_mm"]] == [m.message for m in original["Sick/Scan_mm"]]
    assert [m.message for m in replayed["Sick/Timing"]] == [m.message for m in original["Sick/Timing"]]


def test_the_replay_announces_the_writers_and_refuses_to_mix_with_them(
    recorded: Path, bus: Bus, make_bus: Callable[..., Bus]
) -> None:
    replayer = Replayer(make_bus(), recorded, loop=True)
    assert replayer.writer_modules() == ["base", "dmu", "gps", "sick"]
    stop = threading.Event()
    thread = threading.Thread(target=replayer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: {"replay", "base", "sick"} <= set(bus.live_modules()), timeout=10)
        rows = {row.name: row.info for row in mom.snapshot(bus)}
        base = rows["base"]
        assert base is not None and [i.name for i in base.provides] == ["Base/Drive/State"]
        with pytest.raises(PlutoError, match="base, dmu, gps, sick are running"):
            Replayer(bus, recorded).run()
    finally:
        stop.set()
        thread.join(timeout=10)
    wait_until(lambda: "base" not in bus.live_modules(), timeout=10)


def test_replay_at_10x_drives_localization_in_step_with_the_logs_clock(
    carmen_log: Callable[[str], Path], bus: Bus, make_bus: Callable[..., Bus]
) -> None:
    path = carmen_log("freiburg")
    log = LogFile(path)
    localization = LocalizationModule(bus, LocalizationModuleParams(use_sim_time=True))
    clock = bus.create_reader("Clock", msgs.SimTime)
    lags: list[float] = []
    outputs: list[msgs.PoseEstimate] = []
    laser: list[msgs.PoseEstimate] = []
    statuses: list[tuple[float, float]] = []

    def on_pose(pose: msgs.PoseEstimate) -> None:
        tick = clock.read()
        if tick is not None:
            lags.append(tick.stamp - pose.stamp)
        outputs.append(pose)

    def on_status(status: msgs.FVectorState) -> None:
        tick = clock.read()
        statuses.append((status.stamp, tick.stamp if tick else 0.0))

    bus.create_subscription("Localization/Dead-Reckoning", on_pose, msgs.PoseEstimate, depth=4096, current=False)
    bus.create_subscription("Localization/Laser_Dead-Reckoning", laser.append, msgs.PoseEstimate, depth=4096)
    bus.create_subscription("localization/status", on_status, msgs.FVectorState, depth=4096, current=False)
    localization.start()
    try:
        result = Replayer(make_bus(), log, rate=10.0, only=["Base/Drive/State", "Sick/Timing"]).run()
        odometry = [m.message for m in log.series("Base/Drive/State") if isinstance(m.message, msgs.Odometry)]
        wait_until(lambda: bool(outputs) and outputs[-1].stamp == odometry[-1].stamp, timeout=10)
    finally:
        localization.stop()
    assert result.wall < log.duration / 2  # ten times faster than the log, not at its pace
    assert clock.read() is not None and clock.read().rate == 10.0  # type: ignore[union-attr]
    # in step: each pose came out while the log's clock was at its odometry's time (lag in log seconds)
    lags.sort()
    assert lags[len(lags) // 2] <= 0.25 and lags[int(0.95 * len(lags))] <= 1.0, lags[-5:]
    # never ahead of the log's clock, but for the race between this test's clock reader and the pose: the pose can
    # arrive before the Clock value sent just ahead of its odometry (one odometry period, 0.07 s in this log)
    assert min(lags) >= -0.2, lags[:5]
    # the module's own time is the log's clock (not the wall clock), and it went on to the log's end
    module_times = [module_now for module_now, _ in statuses]
    assert module_times == sorted(module_times)
    assert log.start <= module_times[0] and module_times[-1] <= log.end + 1.0
    assert module_times[-1] >= log.end - 1.0
    assert all(module_now <= clock_now + 0.5 for module_now, clock_now in statuses)
    # the same result as the service's core fed the same inputs
    core = DeadReckoning(localization.core.params)
    for o in odometry:
        core.add_odometry(o.stamp, o.x, o.y, o.theta)
    assert list(outputs[-1].pose) == pytest.approx(list(core.pose().pose), abs=1e-9)
    scans = [m.message.stamp for m in log.series("Sick/Timing")]
    placed = {round(p.stamp, 6): p for p in laser}
    assert len(placed) >= len(scans) - 1  # every scan placed (the last may wait for odometry past it)
    for t in scans[:-1]:
        expected = core.scan(t)
        assert expected is not None
        if round(t, 6) not in placed:  # the one the count above allows: a value this test's reader missed
            continue
        assert list(placed[round(t, 6)].pose) == pytest.approx(list(expected.pose), abs=1e-9)

"""The recorder: the robot's time, which interfaces, every message written on the bus, what a kill leaves."""

from __future__ import annotations

import os
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.errors import PlutoError
from pluto.record.format import LogError
from pluto.record.logfile import LogFile
from pluto.record.recorder import Recorder, RobotTime, Selection, profile_for
from pluto.runtime.profiles import load_profile
from tests.helpers import wait_until
from tests.record.robot import FakeRobot, missing_between

# -- the robot's time ---------------------------------------------------------------------------------------------


def test_wall_time_is_the_write_time() -> None:
    clock = RobotTime(sim=False)
    assert clock.ready and clock.at(1234.5) == 1234.5


def test_sim_time_advances_the_newest_clock_value_written_before() -> None:
    clock = RobotTime(sim=True, max_extrapolation=0.5)
    assert not clock.ready and clock.at(100.0) is None
    clock.tick(10.0, 2.0, 100.0)
    clock.tick(11.0, 2.0, 100.5)
    clock.tick(10.5, 2.0, 100.25)  # heard out of order: placed by its write time
    assert clock.ready
    assert clock.at(100.3) == pytest.approx(10.6)  # from the value written at 100.25
    assert clock.at(100.5) == pytest.approx(11.0)
    assert clock.at(99.75) == pytest.approx(9.5)  # before any value known: back from the oldest
    assert clock.at(110.0) == pytest.approx(12.0)  # a stalled clock: at most 0.5 wall s past its last value


def test_sim_time_never_passes_the_clock_value_written_after() -> None:
    """A clock held up (a replay on a busy machine) falls behind its rate: a write between two of its values gets
    no later time than the second, so one writer's values keep their order."""
    clock = RobotTime(sim=True)
    clock.tick(10.0, 1.0, 100.0)
    assert not clock.settled(100.02)  # the next value may still bound it
    clock.tick(10.01, 1.0, 100.03)  # 0.03 wall s later, 0.01 simulated
    assert clock.settled(100.02) and not clock.settled(100.04)
    assert clock.at(100.02) == pytest.approx(10.01)  # not 10.02
    assert clock.at(100.035) == pytest.approx(10.015)
    clock.tick(2.0, 1.0, 100.05)  # time started again: no bound on the writes before it
    assert clock.at(100.04) == pytest.approx(10.02)


def test_selection() -> None:
    everything = Selection()
    assert everything.wants("Base/Drive/State") and everything.wants("Anything/New")
    assert not everything.wants("Clock")  # the log's time axis
    assert Selection(("Clock",)).wants("Clock")
    some = Selection(("Sick/*", "Base/Drive/State"), ("Sick/Timing",))
    assert some.wants("Sick/Scan_mm") and some.wants("Base/Drive/State")
    assert not some.wants("Sick/Timing") and not some.wants("DMU/State")
    assert some.unmatched(["Sick/Scan"]) == ["Base/Drive/State"]
    with pytest.raises(PlutoError):
        Selection(("@module/*",))


def test_profile_for_starts_the_writers_and_what_they_need() -> None:
    sim = load_profile("sim")
    assert [e.name for e in profile_for(sim, ["Sick/*"], []).entries] == ["sim", "base", "wrist", "sick"]
    assert [e.name for e in profile_for(sim, ["GPS/State"], ["sim"]).entries] == ["base", "gps"]
    assert {e.name for e in profile_for(sim, [], []).entries} == {e.name for e in sim.entries}
    with pytest.raises(PlutoError, match="writes"):
        profile_for(sim, ["Arm/*"], [])


# -- recording a bus ----------------------------------------------------------------------------------------------


def test_every_message_is_recorded_in_order_on_the_robots_time(
    tmp_path: Path, bus: Bus, make_bus: Callable[..., Bus]
) -> None:
    other = make_bus()  # the robot on another session, as across processes
    path = tmp_path / "run.mcap"
    with FakeRobot(other, rate=4.0) as robot:
        wait_until(lambda: "Sick/Scan_mm" in robot.snapshot(), timeout=10)
        with Recorder(bus, path, metadata={"mission": "test"}) as recorder:
            wait_until(lambda: recorder.status().messages > 300, timeout=20)
        written = robot.snapshot()
    status = recorder.status()
    assert status.time_base == "sim" and status.error is None and status.parts == (path,)
    log = LogFile(path)
    assert log.closed and log.info["robot"] == bus.robot and log.info["time_base"] == "sim"
    assert log.info["mission"] == "test" and log.info["start_time"]
    assert "Clock" not in log.channels
    assert set(log.channels) == set(written)
    lost = {i.name: i.lost for i in status.interfaces}
    for name, values in written.items():
        series = log.series(name)
        # every value written while recording, in order; what the writers dropped on the way (a busy machine:
        # they drop rather than stall) is exactly what the recorder counted as lost
        assert missing_between([m.message for m in series], values) == lost[name], name
        assert log.channels[name].count == len(series)
    # written at simulated time `stamp` (4x real time): its log time is when the recorder got it on that time base
    # (the wall clock's would be 1.7e9 s off), a few ms of wall time later, or a stall of the busy machine later
    lags = [m.log_time - m.message.stamp for m in log.series("Base/Drive/State") + log.series("GPS/State")]
    assert all(-4 * 0.02 <= lag <= 4 * 1.0 for lag in lags), (min(lags), max(lags))
    assert statistics.median(lags) < 4 * 0.02
    assert {i.name: i.count for i in status.interfaces} == {n: c.count for n, c in log.channels.items()}


def test_the_time_base_is_the_simulators_once_a_clock_writer_is_there_even_before_its_first_value(
    tmp_path: Path, bus: Bus, make_bus: Callable[..., Bus]
) -> None:
    # A clock that has not written yet is what a recorder sees of one whose value is held up by a busy machine:
    # the writer's presence decides, not a value arriving within some time.
    other = make_bus()
    clock = other.create_publisher("Clock", msgs.SimTime)
    odometry = other.create_publisher("Base/Drive/State", msgs.Odometry)
    path = tmp_path / "held.mcap"
    with Recorder(bus, path, names=["Base/*"]) as recorder:
        assert recorder.status().time_base == "sim"

        def recorded() -> bool:  # written again until the recorder's subscription has reached the writer
            clock.write(msgs.SimTime(stamp=50.0, rate=1.0))
            odometry.write(msgs.Odometry(stamp=50.0))
            return recorder.status().messages > 0

        wait_until(recorded, timeout=10)
    log = LogFile(path)
    assert log.info["time_base"] == "sim"
    times = [m.log_time for m in log.series("Base/Drive/State")]
    # Simulated time, not the wall clock's 1.7e9 s. A write whose own clock value the recorder missed (written while
    # its subscription was still reaching the writer) is placed by the next value it has, back by the wall time
    # between the two writes: a few ms before 50 s, or a stall of a busy machine before.
    assert times and all(49.0 <= t <= 50.5 for t in times), times


def test_wall_clock_without_a_simulator_and_the_clock_only_when_named(
    tmp_path: Path, bus: Bus, make_bus: Callable[..., Bus]
) -> None:
    other = make_bus()
    with FakeRobot(other, clock=False) as robot:
        wait_until(lambda: "Base/Drive/State" in robot.snapshot(), timeout=10)
        with Recorder(bus, tmp_path / "wall.mcap", names=["Base/*"]) as recorder:
            wait_until(lambda: recorder.status().messages > 20, timeout=10)
    log = LogFile(tmp_path / "wall.mcap")
    assert log.info["time_base"] == "wall" and set(log.channels) == {"Base/Drive/State"}
    for m in log.series("Base/Drive/State"):
        assert m.log_time == pytest.approx(m.message.stamp, abs=0.5) and m.log_time == m.publish_time

    with (
        FakeRobot(other) as robot,
        Recorder(bus, tmp_path / "clock.mcap", names=["Clock"], time_base="sim") as recorder,
    ):
        wait_until(lambda: recorder.status().messages > 20, timeout=10)
    log = LogFile(tmp_path / "clock.mcap")
    assert set(log.channels) == {"Clock"}
    ticks = log.series("Clock")
    assert all(isinstance(t.message, msgs.SimTime) for t in ticks)
    assert [t.log_time for t in ticks] == pytest.approx([t.message.stamp for t in ticks], abs=1e-3)


def test_sim_time_waits_for_the_first_clock_value(tmp_path: Path, bus: Bus) -> None:
    odometry = bus.create_publisher("Base/Drive/State", msgs.Odometry)
    clock = bus.create_publisher("Clock", msgs.SimTime)
    with Recorder(bus, tmp_path / "run.mcap", time_base="sim") as recorder:
        odometry.write(msgs.Odometry(stamp=1.0))  # before any Clock: held until one comes
        clock.write(msgs.SimTime(stamp=50.0, rate=1.0))
        odometry.write(msgs.Odometry(stamp=2.0))
        wait_until(lambda: recorder.status().messages == 2, timeout=10)
    times = [m.log_time for m in LogFile(tmp_path / "run.mcap").series("Base/Drive/State")]
    assert times == pytest.approx([50.0, 50.0], abs=0.05)


def test_bad_samples_are_counted_not_recorded(tmp_path: Path, bus: Bus) -> None:
    odometry = bus.create_publisher("Base/Drive/State", msgs.Odometry)
    with Recorder(bus, tmp_path / "run.mcap") as recorder:
        bus.session.put(bus.key("Base/Drive/State"), b"\x93garbage")
        odometry.write(msgs.Odometry(stamp=1.0, x=2.0))
        wait_until(lambda: recorder.status().messages == 1 and recorder.status().undecodable == 1, timeout=10)
    assert [m.message for m in LogFile(tmp_path / "run.mcap").messages()] == [msgs.Odometry(stamp=1.0, x=2.0)]


def test_values_lost_on_the_way_are_counted(tmp_path: Path, bus: Bus) -> None:
    key = bus.key("Heartbeat")
    with Recorder(bus, tmp_path / "run.mcap") as recorder:
        for seq in (1, 2, 5, 6, 10):  # the writer's numbers, as its attachments carry them: 3, 4, 7, 8, 9 lost
            attachment = struct.pack("<dQ", time.time(), seq)
            bus.session.put(key, msgs.encode(msgs.Heartbeat(seq=seq)), attachment=attachment)
        wait_until(lambda: recorder.status().messages == 5, timeout=10)
    status = recorder.status()
    assert status.lost == 5 and status.interfaces[0].lost == 5


def test_a_write_failure_stops_the_recording_with_the_reason(
    tmp_path: Path, bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    odometry = bus.create_publisher("Base/Drive/State", msgs.Odometry)
    recorder = Recorder(bus, tmp_path / "run.mcap")
    recorder.start()

    def broken(*_args: object) -> None:
        raise LogError("cannot write run.mcap: the disk is full")

    # a disk cannot be filled on demand: the recorder's own (private) writer is made to fail as a full one would
    assert recorder._writer is not None
    monkeypatch.setattr(recorder._writer, "add_encoded", broken)
    odometry.write(msgs.Odometry(stamp=1.0))
    assert recorder.failed.wait(10)
    status = recorder.stop()
    assert status.error is not None and "disk is full" in status.error


def test_an_existing_file_or_a_full_disk_fails_at_once(tmp_path: Path, bus: Bus) -> None:
    (tmp_path / "run.mcap").write_bytes(b"keep")
    with pytest.raises(LogError, match="exists"):
        Recorder(bus, tmp_path / "run.mcap").start()
    assert (tmp_path / "run.mcap").read_bytes() == b"keep"
    if Path("/dev/full").exists():
        with pytest.raises(LogError, match="disk is full"):
            Recorder(bus, "/dev/full", force=True).start()


# -- a recorder killed outright -----------------------------------------------------------------------------------


def test_a_sigkilled_recorder_leaves_every_message_up_to_its_last_complete_chunk(tmp_path: Path, bus: Bus) -> None:
    path = tmp_path / "killed.mcap"
    # reliable: a busy machine can make a plain writer drop a value (as it should), which is not the recorder's loss
    beat = bus.create_publisher("Heartbeat", msgs.Heartbeat, reliable=True)
    published = 0
    stop = threading.Event()

    def beats() -> None:
        nonlocal published
        while not stop.wait(0.01):  # 100 Hz
            published += 1
            beat.write(msgs.Heartbeat(seq=published, source="test"))

    thread = threading.Thread(target=beats, daemon=True)
    thread.start()
    process = subprocess.Popen(
        [sys.executable, "-m", "pluto", "record", "Heartbeat", "-o", str(path), "--chunk-interval", "0.5", "-q"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def chunks() -> int:
            try:
                return LogFile(path).chunks
            except LogError:  # not there yet, or no record written yet (the recorder starting on a busy machine)
                return 0

        # generous: a busy machine can take tens of seconds to start a Python process and its bus
        wait_until(lambda: chunks() >= 3 or process.poll() is not None, timeout=90, interval=0.1)
        assert process.poll() is None, process.communicate()[1].decode(errors="replace")
        os.kill(process.pid, signal.SIGKILL)
        at_kill = published
        process.wait(timeout=10)
    finally:
        stop.set()
        thread.join(timeout=5)
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    log = LogFile(path)
    assert not log.closed and "not closed" in log.notes[0]
    got = [m.message.seq for m in log.messages() if isinstance(m.message, msgs.Heartbeat)]
    assert got == list(range(got[0], got[-1] + 1))  # nothing missing up to the last complete chunk
    assert log.chunks >= 3
    # what is lost is the chunk in progress: about half a second, here allowed up to 3 s on a busy machine
    assert at_kill - got[-1] <= 300

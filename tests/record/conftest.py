"""Fixtures of the recording tests: the CARMEN excerpts imported as Pluto logs."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pluto import msgs
from pluto.bus import Bus, BusTimeout
from pluto.record.carmen import import_carmen
from pluto.record.recorder import CLOCK
from pluto.record.replay import Replayer

DATA = Path(__file__).parent / "data"
EXCERPTS = {"intel": DATA / "intel-excerpt.log.gz", "freiburg": DATA / "freiburg-excerpt.log.gz"}


@pytest.fixture
def carmen_log(tmp_path: Path) -> Callable[[str], Path]:
    """``carmen_log("intel")``: the excerpt of that data set imported into a log in the test's folder."""

    def make(name: str) -> Path:
        output = tmp_path / f"{name}.mcap"
        if not output.exists():
            import_carmen(EXCERPTS[name], output)
        return output

    return make


class ClockAfterReplay:
    """The replay's simulated time, run on by the test after the replay's end, one tick at a time, until the modules
    have handled what the replay sent.

    Modules on simulated time step when ``Clock`` moves. A replay's own clock runs on a little past its last message
    (its ``tail``), but at a high rate that is a few wall milliseconds: on a busy machine the last values can reach a
    module after its last step, and then nothing would step it again. Created before the replay, on the modules' bus
    (so it hears the replay's ``Clock``); :meth:`run_until` then writes the next ticks of the same run (a new run id
    would restart the modules).
    """

    def __init__(self, bus: Bus) -> None:
        self._reader = bus.create_reader(CLOCK, msgs.SimTime)

    def run_until(
        self, replayer: Replayer, done: Callable[[], Any], *, step: float = 0.1, timeout: float = 10.0
    ) -> None:
        """Once ``replayer`` has run: write ``Clock`` ticks ``step`` simulated s apart, each after the previous one
        came back, until ``done()``; raise AssertionError after ``timeout`` wall s.

        The ticks go on from the replay's last one (the end of its log and tail), not from the newest value heard
        here: the replay's last ticks may still be on their way, and a tick before them would be time running back
        (the modules would start again). They are written on the replay's bus, after its own: one link carries both
        to the modules, in order (a tick written on the modules' own bus would reach them at once, before the
        replay's last ticks)."""
        last = self._reader.read()
        assert last is not None, "the replay wrote no Clock"
        stamp = max(last.stamp, replayer.schedule.end + replayer.schedule.tail)
        writer = replayer.bus.create_publisher(CLOCK, msgs.SimTime, reliable=True)
        deadline = time.monotonic() + timeout
        try:
            while not done():
                assert time.monotonic() < deadline, f"not done within {timeout} s of simulated time running on"
                stamp += step
                writer.write(msgs.SimTime(stamp=stamp, rate=last.rate, run=last.run))
                with contextlib.suppress(BusTimeout):
                    self._reader.wait_for_update(timeout=1.0)
        finally:
            replayer.bus.release(writer)

"""A module's continuation state: saved atomically and throttled, loaded only by a restart of the same session, run
and time base; a corrupt file means a logged, counted fresh start."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import msgspec
import pytest

from pluto.runtime import persist
from pluto.runtime.persist import Continuation


class State(msgspec.Struct, frozen=True):
    x: float
    note: str = ""


class FakeWall:
    """A wall clock the test moves by hand (the throttle's)."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def continuation(path: Path, *, resume: bool = True, session: str = "s1", wall: FakeWall | None = None) -> Continuation:
    return Continuation(path, State, "loc", resume=resume, session=session, wall=wall or FakeWall())


def test_a_saved_state_is_loaded_by_a_restart_of_the_same_session_and_run(tmp_path: Path) -> None:
    path = tmp_path / "loc.state"
    assert continuation(path).save(State(1.5, "a"), stamp=12.0, run=7)
    assert continuation(path).load(now=13.0, run=7) == (State(1.5, "a"), 12.0)
    assert continuation(path, resume=False).load(now=13.0, run=7) is None  # a first start never resumes


@pytest.mark.parametrize(
    ("session", "now", "run", "why"),
    [
        ("s2", 13.0, 7, "another session"),
        ("s1", 13.0, 8, "another simulated run"),
        ("s1", 11.0, 7, "from the future"),
    ],
)
def test_a_state_of_another_session_run_or_from_the_future_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, session: str, now: float, run: int, why: str
) -> None:
    path = tmp_path / "loc.state"
    continuation(path).save(State(1.5), stamp=12.0, run=7)
    loader = continuation(path, session=session)
    with caplog.at_level(logging.WARNING):
        assert loader.load(now=now, run=run) is None
    assert loader.refused == 1
    assert why in caplog.text


def test_the_simulator_loads_without_a_time_check(tmp_path: Path) -> None:
    path = tmp_path / "loc.state"
    continuation(path).save(State(1.0), stamp=50.0, run=3)
    assert continuation(path).load(now=None, run=3) == (State(1.0), 50.0)


def test_a_corrupt_file_is_a_logged_counted_fresh_start_and_kept_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "loc.state"
    path.write_bytes(b"\x93\x01garbage")
    loader = continuation(path)
    with caplog.at_level(logging.ERROR):
        assert loader.load(now=1.0) is None
    assert loader.corrupt == 1
    assert "corrupt" in caplog.text and str(path) in caplog.text
    assert not path.exists() and path.with_name("loc.state.corrupt").exists()
    # a state of the wrong type is as corrupt as garbage
    Continuation(path, dict, "loc", resume=False, session="s1").save({"y": "no"}, stamp=0.0)
    assert loader.load(now=1.0) is None
    assert loader.corrupt == 2


def test_no_file_is_a_logged_fresh_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert continuation(tmp_path / "none.state").load(now=1.0) is None
    assert "no saved state" in caplog.text


def test_saves_are_throttled_by_the_wall_clock(tmp_path: Path) -> None:
    wall = FakeWall()
    saver = continuation(tmp_path / "loc.state", wall=wall)
    built: list[float] = []

    def make(x: float) -> State:
        built.append(x)
        return State(x)

    assert saver.save_due(lambda: make(1.0), stamp=1.0)
    wall.t += 0.1
    assert not saver.save_due(lambda: make(2.0), stamp=2.0)  # too soon: not even built
    wall.t += 0.15
    assert saver.save_due(lambda: make(3.0), stamp=3.0)
    assert saver.save_due(lambda: make(3.5), stamp=3.5, now=True)  # a change not to lose: taken however soon
    assert built == [1.0, 3.0, 3.5]
    assert saver.flush()
    assert 1 <= saver.saves <= 3  # one may have been superseded before its turn
    assert continuation(tmp_path / "loc.state").load(now=5.0) == (State(3.5), 3.5)
    assert saver.save(State(4.0), stamp=4.0)  # a shutdown's save is never throttled
    assert continuation(tmp_path / "loc.state").load(now=5.0) == (State(4.0), 4.0)


def test_periodic_saves_are_written_off_the_step_and_never_over_a_newer_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A disk that takes its time over a rename (ext4 writes the data out first): the step that takes a periodic save
    # does not wait for it, and a shutdown's direct save, newer, is what the file ends with.
    wall = FakeWall()
    path = tmp_path / "state" / "loc.state"
    saver = continuation(path, wall=wall)
    renaming, release = threading.Event(), threading.Event()
    replace = os.replace
    written: list[float] = []

    def slow(src: str, dst: str) -> None:
        renaming.set()
        assert release.wait(30), "the test did not release the disk"
        written.append(msgspec.msgpack.decode(Path(src).read_bytes())["stamp"])
        replace(src, dst)

    monkeypatch.setattr(persist.os, "replace", slow)
    assert saver.save_due(lambda: State(1.0), stamp=1.0)  # returns while the write waits on the disk
    assert renaming.wait(30)
    wall.t += 1.0
    assert saver.save_due(lambda: State(2.0), stamp=2.0)  # queued behind it
    release.set()
    assert saver.save(State(3.0), stamp=3.0)
    assert saver.flush()
    assert continuation(path).load(now=5.0) == (State(3.0), 3.0)
    assert written[0] == 1.0 and written[-1] == 3.0 and written == sorted(written), written  # never older over newer
    assert saver.saves == len(written) and saver.save_errors == 0
    assert [p.name for p in path.parent.iterdir()] == ["loc.state"]


def test_a_save_that_fails_half_way_leaves_the_old_state_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state" / "loc.state"
    saver = continuation(path)
    saver.save(State(1.0), stamp=1.0)

    def killed(_src: object, _dst: object) -> None:
        raise OSError("killed before the rename")

    monkeypatch.setattr(persist.os, "replace", killed)
    assert not saver.save(State(2.0), stamp=2.0)
    monkeypatch.undo()
    assert saver.save_errors == 1
    assert continuation(path).load(now=3.0) == (State(1.0), 1.0)
    assert [p.name for p in path.parent.iterdir()] == ["loc.state"]  # no temporary file left behind


def test_clear_states_removes_only_the_modules_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PLUTO_RUNTIME_DIR", str(tmp_path))
    for name in ("a", "b", "c"):
        persist.state_path("r", name).write_bytes(b"x")
    assert sorted(persist.clear_states("r", ["a", "b", "z"])) == ["a", "b"]
    assert [p.name for p in persist.state_folder("r").iterdir()] == ["c.state"]


def test_the_environment_says_whether_this_is_a_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(persist.RESUME_ENV, raising=False)
    assert not persist.restarted()
    monkeypatch.setenv(persist.RESUME_ENV, "0")
    assert not persist.restarted()
    monkeypatch.setenv(persist.RESUME_ENV, "1")
    monkeypatch.setenv(persist.SESSION_ENV, "abc")
    assert persist.restarted()
    loader = Continuation(Path(os.devnull), State, "loc")
    assert loader.resume and loader.session == "abc"

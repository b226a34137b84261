"""The motion controller's behaviours in progress (:class:`Job`), and what of them a restarted module continues
from (:class:`MotionState`, see :meth:`.core.MotionController.snapshot`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from .codes import MovetoStatus
from .geometry import CoverageGrid
from .moveto import Nav

__all__ = ["Job", "JobState", "MotionState", "job_state"]


@dataclass
class Job:
    """The behaviour in progress (or stopped, waiting to be resumed)."""

    kind: str  # moveto, explore, home, investigate
    nav: Nav | None = None
    grid: CoverageGrid | None = None
    tried: list[tuple[float, float]] = field(default_factory=list)
    targets: int = 0
    phase: str = ""
    object: tuple[float, float, float] | None = None
    swept: float = 0.0
    last_angle: float | None = None
    arm_asked: bool = False
    view: int = 0
    view_since: float | None = None
    view_seen: bool = False  # a scan was taken from the current view


class JobState(msgspec.Struct, frozen=True, kw_only=True):
    """A behaviour to continue (:class:`MotionState`).

    Attributes:
        kind: moveto, home, explore or investigate.
        goal: a moveto's or the way home's goal, m.
        tried: the places an exploration gave up on or reached, m.
        targets: the places an exploration went for so far.
    """

    kind: str
    goal: tuple[float, float] | None = None
    tried: list[tuple[float, float]] = msgspec.field(default_factory=list)
    targets: int = 0


class MotionState(msgspec.Struct, frozen=True, kw_only=True):
    """What a restarted motion module continues from (:meth:`.core.MotionController.snapshot`).

    Attributes:
        rect: the rectangle (x, y, θ of its home, half-width b, height h; m, rad).
        moveto_status: element[2].
        job: the behaviour in progress; stopped: the one waiting for a resume.
    """

    rect: tuple[float, float, float, float, float]
    moveto_status: int = MovetoStatus.IDLE.value
    job: JobState | None = None
    stopped: JobState | None = None


def job_state(job: Job | None) -> JobState | None:
    """What of ``job`` a restarted module continues from (None: no job)."""
    if job is None:
        return None
    goal = job.nav.goal if job.nav is not None and job.kind in ("moveto", "home") else None
    return JobState(kind=job.kind, goal=goal, tried=list(job.tried), targets=job.targets)

"""The motion controller's tuning: the one declaration of its parameters, their ranges and their meaning (the
motion module's parameters derive from it: :mod:`pluto.runtime.params`)."""

from __future__ import annotations

import math
from typing import Annotated

from pluto.runtime.params import ModuleParams
from pluto.runtime.ranges import Angle, Radius, Speed, Timeout, TurnRate, between

__all__ = ["MotionParams"]


class MotionParams(ModuleParams, kw_only=True, forbid_unknown_fields=True):
    """Tuning of the motion controller (the motion module's parameters derive from it: :mod:`pluto.runtime.params`).

    Attributes:
        robot_radius: m.
        ray_margin: a ray is free if a strip of half-width robot_radius + ray_margin is, m.
        ray_margin_tight: ... or of half-width robot_radius + ray_margin_tight when no ray is free otherwise, m.
        ray_max: longest ray followed at once, m.
        ray_step: angle between the rays weighed, rad.
        stop_short: a ray's usable length stops this far before what ends it, m.
        door_max: openings narrower than this are passed as doorways (lined up and driven through), m.
        gap_jump: range step that marks the edge of an opening, m.
        handover: the avoid goto takes over when the goal is nearer than this and in plain view, m.
        near_reach: ... and, after a look around, when it is nearer than this and was seen free whichever way the
            robot faces, m.
        goal_tolerance: a moveto or a waypoint is reached within this distance, m.
        near_enough: ... and a moveto whose simple goto is stuck (obstacles beside the goal) within this one, m.
        speed, turn_rate: limits given to the avoid goto, m/s, rad/s.
        door_speed: speed through a doorway, m/s.
        door_offset: the robot lines up on a doorway's axis before driving through when farther than this off it, m.
        door_strip: half-width of the strip ahead the laser protection checks while driving through a doorway, m
            (narrower than the robot: the jambs pass beside it, a person or a box in the doorway stops it).
        look_pan: largest pan when looking to a side, rad.
        ground_tilt: tilt when looking at the ground (positive down), rad.
        laser_height: height of the scan plane, m (the ground is seen at laser_height / sin(tilt)).
        look_time: time spent looking at each view once the wrist is there, s.
        wrist_tolerance: the wrist is there within this, rad.
        wrist_resend: a wrist command is sent again when the wrist is not there this long after it was sent, s.
        blocked_penalty: least extra cost of a way whose end the scans show a wall between it and the goal, m.
        detour_max: most extra cost of a way for the wall between its end and the goal, m (the farther ends of a
            long wall, seen in part as the robot goes along it, would make it turn back and forth).
        unknown_weight: weight of the straight distance from a way's end to the goal in its cost.
        room_reach: a goal farther than this aside from a narrow doorway's axis is taken not to be behind it, m.
        room_area: a robot whose scans show less free area around it than this is in a room, whose doorways lead
            out, m².
        room_side: ... as is the space before a narrow doorway closed in within this distance both ways along its
            wall, m (the doorway leads out of that room).
        turn_first: before the avoid goto to a way is sent, the robot turns on the spot until the way is within this
            of its heading, rad ...
        turn_time: ... or for at most this long, s.
        straight_reach: a way shorter than this is driven straight at its end, not by the avoid goto, m ...
        straight_blocked: ... and ends when the laser protection holds the robot for this long, s.
        max_decisions: a moveto gives up after this many scans without reaching its goal.
        progress_time: a way on which the robot came no nearer its end for this long is given up, s.
        explore_cell: cell of the coverage grid, m.
        explore_reach: a place to go to must be this near the unseen cells it would show, m.
        explore_min_cells: ... and there must be at least this many of them.
        explore_max_targets: an exploration returns home after this many places.
        investigate_range: objects farther than this are not investigated, m.
        circle_clearance: distance between the robot's body and the object while circling, m.
        circle_speed: m/s.
    """

    robot_radius: Radius = 0.4
    ray_margin: Annotated[float, between(0.0, 2.0)] = 0.2
    ray_margin_tight: Annotated[float, between(0.0, 2.0)] = 0.05
    ray_max: Annotated[float, between(0.0, 100.0, open_low=True)] = 8.0
    ray_step: Annotated[float, between(0.0, 1.0, open_low=True)] = math.radians(5.0)
    stop_short: Annotated[float, between(0.0, 10.0)] = 0.6
    door_max: Annotated[float, between(0.0, 10.0)] = 1.4
    gap_jump: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.6
    handover: Annotated[float, between(0.0, 100.0)] = 6.0
    near_reach: Annotated[float, between(0.0, 100.0)] = 2.0
    goal_tolerance: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.3
    near_enough: Annotated[float, between(0.0, 10.0)] = 0.5
    speed: Speed = 0.6
    turn_rate: TurnRate = 1.0
    door_speed: Speed = 0.2
    door_offset: Annotated[float, between(0.0, 5.0)] = 0.04
    door_strip: Annotated[float, between(0.0, 5.0, open_low=True)] = 0.3
    look_pan: Angle = 1.4
    ground_tilt: Angle = 0.35
    laser_height: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.9
    look_time: Timeout = 0.4
    wrist_tolerance: Annotated[float, between(0.0, math.pi, open_low=True)] = 0.05
    wrist_resend: Timeout = 3.0
    blocked_penalty: Annotated[float, between(0.0, 1000.0)] = 2.0
    detour_max: Annotated[float, between(0.0, 1000.0)] = 5.0
    room_reach: Annotated[float, between(0.0, 100.0)] = 2.5
    room_area: Annotated[float, between(0.0, 1e6)] = 30.0
    room_side: Annotated[float, between(0.0, 1000.0)] = 8.5
    turn_first: Annotated[float, between(0.0, math.pi)] = math.radians(10.0)
    straight_reach: Annotated[float, between(0.0, 100.0)] = 3.0
    straight_blocked: Timeout = 2.0
    turn_time: Timeout = 10.0
    unknown_weight: Annotated[float, between(0.0, 100.0)] = 1.3
    max_decisions: Annotated[int, between(1, 100_000)] = 40
    progress_time: Timeout = 15.0
    explore_cell: Annotated[float, between(0.0, 10.0, open_low=True)] = 0.25
    explore_reach: Annotated[float, between(0.0, 100.0)] = 1.5
    explore_min_cells: Annotated[int, between(1, 1_000_000)] = 4
    explore_max_targets: Annotated[int, between(1, 100_000)] = 30
    investigate_range: Annotated[float, between(0.0, 100.0, open_low=True)] = 5.0
    circle_clearance: Annotated[float, between(0.0, 10.0)] = 0.5
    circle_speed: Speed = 0.3

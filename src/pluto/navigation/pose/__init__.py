"""The pose module's pure core (the original's poseModule, docs/design.md): walls in laser scans, an a-priori wall map,
and an extended Kalman filter of the laser's pose that corrects the localization service's dead reckoning.

``features`` extracts lines from a scan, ``map`` holds the map's walls and their index, ``core`` is the filter (its
state, predict step and lost status; ``update`` its update against the map's walls, ``relocalization`` the global
search of the map), ``findwall`` the original's "find wall" and ``calibration`` the odometry calibration from one
wall. Nothing here touches the bus, a thread or a clock.
"""

from pluto.navigation.pose.calibration import (
    OdometryCalibration,
    WallCalibration,
    WallSighting,
    fit_distance_scale,
    fit_heading,
)
from pluto.navigation.pose.core import (
    FilterStatus,
    Match,
    PoseFilter,
    PoseFilterParams,
    Relocalization,
    UpdateResult,
    relocalize,
)
from pluto.navigation.pose.features import LineFeature, LineTable, extract_lines, line_table
from pluto.navigation.pose.findwall import FoundWall, find_wall
from pluto.navigation.pose.map import WallMap

__all__ = [
    "FilterStatus",
    "FoundWall",
    "LineFeature",
    "LineTable",
    "Match",
    "OdometryCalibration",
    "PoseFilter",
    "PoseFilterParams",
    "Relocalization",
    "UpdateResult",
    "WallCalibration",
    "WallMap",
    "WallSighting",
    "extract_lines",
    "find_wall",
    "fit_distance_scale",
    "fit_heading",
    "line_table",
    "relocalize",
]

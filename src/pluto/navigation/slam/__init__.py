"""The slam module's pure core (the original's slamModule, docs/design.md): a map of walls built while the same filter
corrects the laser's pose.

``ekf`` is the full extended Kalman filter over the pose and the walls (with the wall measurement model, new walls
and the odometry shared with the pose module), ``compressed`` the compressed filter of Guivant and Nebot that gives
the same estimate at the cost of the local area, ``wall`` the walls' ends kept on the filter's lines (M-space
features), ``association`` the pairing of a scan's lines with walls and the tentative list of new ones, and ``core``
one scan's step. Lines come from the pose module's :func:`~pluto.navigation.pose.extract_lines`. Nothing of these
touches the bus, a thread or a clock.

``mapfile`` writes the map as a world file (atomically); ``module`` is the shell on the bus (the thread, the posts to
localization, saving on request and at the stop) and ``proxy`` its client, :class:`SlamProxy`. They are imported
from their own modules, not from here, so that using the core does not pull in the bus.
"""

from pluto.navigation.slam.association import Association, AssociationParams, Pair, TentativeWalls, associate
from pluto.navigation.slam.compressed import AreaParams, CompressedWallEKF
from pluto.navigation.slam.core import SlamFilter, SlamStep, WallSlam
from pluto.navigation.slam.ekf import Odometry, WallEKF, WallObservation, new_wall, observe_wall
from pluto.navigation.slam.wall import WallSegments

__all__ = [
    "AreaParams",
    "Association",
    "AssociationParams",
    "CompressedWallEKF",
    "Odometry",
    "Pair",
    "SlamFilter",
    "SlamStep",
    "TentativeWalls",
    "WallEKF",
    "WallObservation",
    "WallSegments",
    "WallSlam",
    "associate",
    "new_wall",
    "observe_wall",
]

"""``pluto.player.client``: the Player 1.5 client (see :mod:`pluto.gateways.player.client`)."""

from pluto.gateways.player.client import (
    Geometry,
    LaserState,
    PlayerClient,
    PlayerClientError,
    Position3dState,
    PositionState,
    RequestRefused,
    SonarState,
)

__all__ = [
    "Geometry",
    "LaserState",
    "PlayerClient",
    "PlayerClientError",
    "Position3dState",
    "PositionState",
    "RequestRefused",
    "SonarState",
]

"""``pluto.player``: the Player 1.5 gateway under its short name (it lives in :mod:`pluto.gateways.player`)."""

from pluto.gateways.player import (
    Access,
    DataMode,
    DeviceCode,
    MsgType,
    PlayerClient,
    PlayerClientError,
    PlayerConnection,
    RequestRefused,
    encode_message,
)

__all__ = [
    "Access",
    "DataMode",
    "DeviceCode",
    "MsgType",
    "PlayerClient",
    "PlayerClientError",
    "PlayerConnection",
    "RequestRefused",
    "encode_message",
]

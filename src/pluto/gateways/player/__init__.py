"""The Player gateway: a server (and a client) of the Player 1.5 TCP protocol, so that Player clients of any
language can drive the robot and read its position, pose, laser and sonar.

- :mod:`.protocol` frames messages (sans-I/O), :mod:`.structs` packs and parses every payload byte-exact (those
  of the player device itself in :mod:`.player_device`, on the helpers of :mod:`.packing`), :mod:`.devices`
  converts them to and from the bus's SI values, :mod:`.frames` keeps the odometry frame clients declare
  (SET_ODOM) and puts header times on the clock of the data;
- :mod:`.session` is one client's protocol state, :mod:`.server` the asyncio TCP server, :mod:`.module` the
  ``player`` module on the bus;
- :mod:`.client` is a Python client (``pluto.player.client.PlayerClient``).
"""

from pluto.gateways.player.client import PlayerClient, PlayerClientError, RequestRefused
from pluto.gateways.player.protocol import Access, DataMode, DeviceCode, MsgType, PlayerConnection, encode_message

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

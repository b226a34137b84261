"""The localization service (the original's localModule, docs/design.md): dead reckoning, laser poses at scan time,
posted poses.

``core`` holds the pure logic (``dead_reckoning``, ``frames`` and ``adjustment``, with the ``series`` they read
from), ``module`` the shell on the bus, ``proxy`` the client API (:class:`LocProxy`).
"""

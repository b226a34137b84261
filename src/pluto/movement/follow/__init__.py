"""The follow module: find a person with the laser and follow them at a set distance, through avoid.

:mod:`~pluto.movement.follow.detect` finds person-shaped blobs in a scan, :mod:`~.track` tracks them with Kalman
filters in the world frame, :mod:`~.core` chooses the person and holds the control law and the status codes,
:mod:`~.module` is the shell on the bus and :mod:`~.proxy` the client API
(:class:`~pluto.movement.follow.proxy.FollowProxy`).
"""

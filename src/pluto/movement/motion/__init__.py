"""The motion module: moveto by ray following, explore a rectangle, investigate an object, on top of avoid.

:mod:`~pluto.movement.motion.core` holds the pure behaviours and the status codes, :mod:`~.geometry` the geometry
of rays, openings and the coverage grid, :mod:`~.module` the shell on the bus and :mod:`~.proxy` the client API
(:class:`~pluto.movement.motion.proxy.MotionProxy`).
"""

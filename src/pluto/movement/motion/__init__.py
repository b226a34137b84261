"""The motion module: moveto by ray following, explore a rectangle, investigate an object, on top of avoid.

:mod:`~pluto.movement.motion.core` holds the controller (commands, jobs, stale inputs, continuing after a restart);
its behaviours are :mod:`~.moveto` (ray following, with the choice of a way in :mod:`~.ways`), :mod:`~.explore` and
:mod:`~.investigate`; :mod:`~.geometry` the geometry of rays, openings, rooms and the coverage grid; :mod:`~.codes`
the command flags and status codes (IntEnums); :mod:`~.module` the shell on the bus and :mod:`~.proxy` the client
API (:class:`~pluto.movement.motion.proxy.MotionProxy`).
"""

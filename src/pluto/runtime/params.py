"""Classes of parameters: the base every one derives from, and the parameters every module has.

Strategy: a class of parameters (a module's, or the tuning of an algorithm a module hands it) is a msgspec Struct
whose numbers declare their valid range once, on their type (:mod:`pluto.runtime.ranges`), and whose fields write
their default once. A module whose logic lives in a core takes the core's class as its own, or derives its Params
from it and adds what only the shell needs (a file to read, the wrist's speed)::

    class DriveParams(ModuleParams, ...):                    # pluto.movement.drive.core: the controller's tuning
        max_speed: Speed = 1.0
    class DriveModuleParams(DriveParams, ...):               # pluto.movement.drive.module: what the shell adds
        calibration_file: str = ""

so the values a user sets (a configuration file, ``-p``, ``pluto param set``) are the ones the controller runs with,
and ``pluto param list`` shows the controller's own defaults and ranges. The core's class derives from
:class:`ModuleParams` for that reason only: the controller never reads ``rate_hz`` and the others.

:class:`Params` checks the declared ranges of an instance built in Python (msgspec checks them when it converts plain
values); a rule between fields (a slow-down distance beyond the stop distance) stays in the class's
``__post_init__``, after ``super().__post_init__()``.

The classes are not frozen (a class's bases must all be frozen or none, and the modules' Params never were), but
they are used as values: nothing sets a field of an instance; a change is a new instance (``set_parameters``,
``msgspec.structs.replace``), which checks the ranges again.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from pluto.runtime.ranges import Rate, check_ranges

__all__ = ["ModuleParams", "Params"]

S = TypeVar("S", bound=msgspec.Struct)


class Params(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every class of parameters: its numbers are checked against their declared ranges when it is built.

    Raises:
        ValueError: a number out of its range (nan and ±inf too), with the parameter's name and its range.
    """

    def __post_init__(self) -> None:
        # msgspec checks the declared ranges when it converts plain values; this also checks an instance built in
        # Python, with the same message
        check_ranges(type(self), {name: getattr(self, name) for name in self.__struct_fields__})


class ModuleParams(Params, kw_only=True, forbid_unknown_fields=True):
    """Parameters every module has.

    Attributes:
        rate_hz: rate of the control step, Hz.
        autostart: start the control step when the module starts (else wait for ``start_activity``).
        use_sim_time: follow the simulated time on the ``Clock`` interface instead of the wall clock.
    """

    rate_hz: Rate = 10.0
    autostart: bool = True
    use_sim_time: bool = False

    def subset(self, cls: type[S], *, shared: type[msgspec.Struct] | None = None) -> S:
        """An instance of ``cls`` (another class of parameters) with the fields it shares with these parameters taken
        from them, and the others at ``cls``'s defaults: for a module whose parameters derive from one core's class
        and whose other core shares some of them (the follow module's person and trail followers).

        Args:
            cls: the class to make.
            shared: take only the fields of this class (a base of both); by default every field both have.
        """
        wanted = set(cls.__struct_fields__ if shared is None else shared.__struct_fields__)
        wanted &= set(cls.__struct_fields__)
        return cls(**{name: getattr(self, name) for name in self.__struct_fields__ if name in wanted})

"""``pluto param``: list, read and change a running module's parameters (ROS 2's ``param``).

Every module serves ``<module>/list_parameters``, ``<module>/get_parameters`` and ``<module>/set_parameters``
(:class:`pluto.runtime.module.Module`); the module validates a change against its ``Params`` and refuses one to a
parameter it cannot apply while running ("read-only at run time": restart it with ``-p NAME=VALUE``).
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError, LaunchError, PlutoError, RemoteError

if TYPE_CHECKING:
    from pluto import msgs
    from pluto.bus import Bus

__all__ = ["parse_value", "register", "run"]

DESCRIPTION = """\
Lists, reads or changes the parameters of a running module. `list` shows each parameter's type, value, default,
valid range (of a number), whether it can change while the module runs, and what it means. `set` checks the new
value against the module's parameter types and ranges: a value out of range is refused with the range, and the
module goes on unchanged; a parameter the module cannot change while running is refused ("read-only at run time":
restart the module with -p NAME=VALUE). VALUE is JSON (0.3, true, "text", [1, 2]); a word that is not JSON
counts as a string.

examples:
  pluto param list drive
  pluto param get drive max_speed
  pluto param set drive max_speed 0.3
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``param`` subcommand."""
    p = add_parser(subparsers, "param", run, "list, read and change a running module's parameters", DESCRIPTION)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="every parameter of MODULE: type, value, default, run-time change")
    listing.add_argument("module", metavar="MODULE")
    get = actions.add_parser("get", help="the value of a parameter (all of them without NAME)")
    get.add_argument("module", metavar="MODULE")
    get.add_argument("name", metavar="NAME", nargs="?")
    put = actions.add_parser("set", help="change a parameter while the module runs")
    put.add_argument("module", metavar="MODULE")
    put.add_argument("name", metavar="NAME")
    put.add_argument("value", metavar="VALUE", help="JSON, or a word taken as a string")
    for q in (listing, get, put):
        q.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the module (default 5)")


def parse_value(text: str) -> Any:
    """A parameter value from the command line: JSON if it is JSON (``0.3``, ``true``, ``[1, 2]``), else the text."""
    import msgspec

    try:
        return msgspec.json.decode(text.encode())
    except msgspec.DecodeError:
        return text


def _reason(err: RemoteError) -> str:
    """The module's own words from a service error (``drive/set_parameters: ValueError: x`` -> ``x``)."""
    text = str(err)
    _, _, rest = text.partition(": ")
    rest = re.sub(r"^(?:KeyError|ValueError|ValidationError): ", "", rest or text)
    if len(rest) >= 2 and rest[0] == rest[-1] and rest[0] in "'\"":  # a KeyError's message comes quoted
        rest = rest[1:-1]
    return rest


def _call(bus: Bus, module: str, method: str, request: Any, reply_type: Any, timeout: float) -> Any:
    try:
        return bus.call(f"{module}/{method}", request, reply_type, timeout=timeout)
    except RemoteError as err:
        raise PlutoError(f"{module}: {_reason(err)}") from None


def _show(value: Any) -> str:
    import msgspec

    return msgspec.json.encode(value).decode()


def run(args: argparse.Namespace) -> int:
    """Carry out the param action.

    Returns:
        0.

    Raises:
        LaunchError: the module is not running.
        PlutoError: the module refused (an unknown parameter, a bad value, a parameter read-only at run time).
        BusTimeout: the module did not answer within ``--timeout``.
    """
    from pluto import msgs
    from pluto.bus import BusTimeout
    from pluto.cli.common import open_bus

    if args.timeout <= 0:
        raise ConfigError(f"--timeout must be > 0 s, got {args.timeout}")
    with open_bus(args) as bus:
        if args.module not in bus.live_modules():
            try:  # right after this process joined, the module's announcement can still be on its way
                bus.wait_for_module(args.module, timeout=1.0)
            except BusTimeout:
                raise LaunchError(
                    f"{args.module} is not running on robot {bus.robot} (`pluto mom` lists the modules)"
                ) from None
        if args.action == "list":
            infos: list[msgs.ParameterInfo] = _call(
                bus, args.module, "list_parameters", None, list[msgs.ParameterInfo], args.timeout
            )
            rows = [
                (
                    p.name,
                    p.type,
                    _show(p.value),
                    _show(p.default),
                    p.range or "-",
                    "yes" if p.dynamic else "no",
                    p.description,
                )
                for p in infos
            ]
            header = ("NAME", "TYPE", "VALUE", "DEFAULT", "RANGE", "RUN-TIME", "DESCRIPTION")
            widths = [max(len(r[i]) for r in [header, *rows]) for i in range(6)]
            for row in [header, *rows]:
                print("  ".join(f"{cell:<{w}}" for cell, w in zip(row[:6], widths, strict=True)) + "  " + row[6])
            return 0
        if args.action == "get":
            wanted = [args.name] if args.name else None
            values: dict[str, Any] = _call(bus, args.module, "get_parameters", wanted, dict[str, Any], args.timeout)
            if args.name:
                print(_show(values[args.name]))
            else:
                for key, value in values.items():
                    print(f"{key} = {_show(value)}")
            return 0
        changes = {args.name: parse_value(args.value)}
        done: dict[str, Any] = _call(bus, args.module, "set_parameters", changes, dict[str, Any], args.timeout)
        for key, value in done.items():
            print(f"{args.module}: {key} = {_show(value)}")
    return 0

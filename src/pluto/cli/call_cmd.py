"""``pluto call``: call a module's service (request/reply) by hand, or list the services of the running modules.

Modules serve requests with :meth:`pluto.runtime.module.Module.create_service` on ``<module>/<name>`` (every module
also serves ``<module>/start_activity``, ``<module>/stop_activity``, its parameters and ``mom/<module>``); each
module lists its services in its MOM entry, which is where this command finds them.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import TYPE_CHECKING, Any

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError, PlutoError

if TYPE_CHECKING:
    from pluto.bus import Bus

__all__ = ["register", "run", "services"]

DESCRIPTION = """\
Sends REQUEST (JSON; none if not given) to the service SERVICE and prints the reply as JSON. Without SERVICE, or
with a name no running module serves, lists the services of the running modules.

examples:
  pluto call                                   list the services
  pluto call drive/get_parameters '["max_speed"]'
  pluto call avoid/stop_activity
  pluto call mom/drive                         what MOM knows of the drive module
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``call`` subcommand."""
    p = add_parser(subparsers, "call", run, "call a module's service, or list the services", DESCRIPTION)
    p.add_argument("service", metavar="SERVICE", nargs="?", help="the service (`pluto call` lists them)")
    p.add_argument("request", metavar="REQUEST", nargs="?", help="the request, JSON (default: none)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the reply (default 5)")


def services(bus: Bus, timeout: float = 1.0) -> dict[str, list[str]]:
    """The services of the running modules, by module (a module that did not answer MOM has none listed)."""
    from pluto.runtime import mom

    return {row.name: sorted(row.info.services) for row in mom.snapshot(bus, timeout) if row.info is not None}


def _listing(found: dict[str, list[str]]) -> str:
    lines = []
    for module, names in found.items():
        lines.append(f"{module}:")
        lines += [f"  {name}" for name in names]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Call the service and print its reply, or list the services.

    Returns:
        0 after a reply or a listing; 1 if no running module serves the name (the services are listed on stderr).

    Raises:
        ConfigError: the request is not JSON.
        BusTimeout: no reply within ``--timeout``.
        RemoteError: the service replied with an error.
    """
    import msgspec

    from pluto.cli.common import open_bus

    request: Any = None
    if args.request is not None:
        try:
            request = msgspec.json.decode(args.request.encode())
        except msgspec.DecodeError as err:
            raise ConfigError(f"the request is not JSON ({err}): {args.request!r}") from None
    if args.timeout <= 0:
        raise ConfigError(f"--timeout must be > 0 s, got {args.timeout}")
    with open_bus(args) as bus:
        found = services(bus)
        if args.service is None:
            if not found:
                print(f"robot {bus.robot}: no modules running, so no services (`pluto mom`)")
            else:
                print(_listing(found))
            return 0
        known = {name for names in found.values() for name in names}
        if args.service not in known:
            where = f"robot {bus.robot}"
            if not found:
                raise PlutoError(f"no service {args.service!r} on {where}: no modules running (`pluto mom`)")
            print(
                f"pluto call: no running module serves {args.service!r} on {where}; the services are:\n"
                + _listing(found),
                file=sys.stderr,
            )
            return 1
        reply = _call_saying_so(bus, args.service, request, args.timeout)
        print(msgspec.json.encode(reply).decode())
    return 0


def _call_saying_so(bus: Bus, service: str, request: Any, timeout: float) -> Any:
    """``bus.call``, saying on stderr what it waits for if the reply takes more than half a second."""
    outcome: list[Any] = []

    def call() -> None:
        try:
            outcome.append((True, bus.call(service, request, timeout=timeout)))
        except Exception as err:  # handed to the caller's thread
            outcome.append((False, err))

    thread = threading.Thread(target=call, name="pluto-call", daemon=True)
    thread.start()
    thread.join(0.5)
    if thread.is_alive():
        print(f"waiting for the reply of {service} (up to {timeout:g} s) ...", file=sys.stderr, flush=True)
        thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value

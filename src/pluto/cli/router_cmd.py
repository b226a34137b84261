"""``pluto router``: a Zenoh router, the meeting point of the robot's machines.

Plain, it routes for anyone who reaches its port. With ``--secure`` it listens on ``tls/`` endpoints only, admits
only machines holding a certificate of the robot's CA (mutual TLS: :mod:`pluto.bus.certs`), and lets each do what
its role allows (Zenoh's access control, default deny: :mod:`pluto.bus.access`). Its own certificate, the CA's
certificate and the list of machines come from its folder made by ``pluto certs add NAME --role router``.
"""

from __future__ import annotations

import argparse
import ipaddress
from pathlib import Path
from typing import Any

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError, PlutoError

__all__ = ["DEFAULT_LISTEN", "DEFAULT_SECURE_LISTEN", "register", "run", "secure_config"]

DEFAULT_LISTEN = "tcp/127.0.0.1:7447"
"""Where the router listens without --listen: this machine only."""
DEFAULT_SECURE_LISTEN = "tls/127.0.0.1:7447"
"""Where a secure router listens without --listen: this machine only."""
ANY_ADDRESS = ("0.0.0.0", "::")


def register(subparsers: Subparsers) -> None:
    """Register the ``router`` subcommand."""
    p = add_parser(
        subparsers,
        "router",
        run,
        "run a bus router, the meeting point for several machines",
        "Runs a Zenoh router. On every machine of the robot set PLUTO_CONNECT (or bus.connect in the\n"
        "configuration file) to its endpoint. It listens on the loopback only unless told otherwise. A plain\n"
        "router lets anyone who reaches its port read and command the robot: listen on this machine's address in\n"
        "the robot's network rather than on every network (tcp/0.0.0.0), and let the firewall admit the robot's\n"
        "machines only.\n\n"
        "With --secure it listens on tls/ endpoints and admits only the machines enrolled with `pluto certs add`,\n"
        "each as its role allows (a viewer reads but cannot command); those set PLUTO_TLS to their folder.\n\n"
        "example: pluto router --listen tcp/192.168.1.10:7447   (this machine's address in the robot's network)\n"
        "example: pluto router --secure --listen tls/192.168.1.10:7447\n"
        "example: pluto router --listen tcp/10.0.1.1:7447 --connect tcp/10.0.9.2:7447 --thin wg0 --thin-robot r1\n"
        "         (a site's router linked with another site's, the data of its robot r1 thinned on the link wg0)",
    )
    p.add_argument(
        "--listen",
        action="append",
        metavar="ENDPOINT",
        help=f"endpoint to listen on, repeatable (default {DEFAULT_LISTEN}; with --secure {DEFAULT_SECURE_LISTEN})",
    )
    p.add_argument(
        "--connect",
        action="append",
        metavar="ENDPOINT",
        default=[],
        help="another site's router to link with, repeatable (routers linked route between their sites)",
    )
    p.add_argument(
        "--thin",
        action="append",
        metavar="IFACE",
        default=[],
        help="network interface towards other sites or viewers on which scans, poses and odometry leave thinned "
        "(1-5 Hz; commands, statuses and calls untouched), repeatable; needs --thin-robot",
    )
    p.add_argument(
        "--thin-robot",
        action="append",
        metavar="NAME",
        default=[],
        help="with --thin: a robot of this site whose data is thinned, repeatable",
    )
    p.add_argument(
        "--secure",
        action="store_true",
        help="mutual TLS and access control by role: only machines enrolled with `pluto certs add` get in",
    )
    p.add_argument(
        "--tls",
        metavar="FOLDER",
        type=Path,
        help="with --secure: the router's folder from `pluto certs add NAME --role router` "
        "(default ~/.config/pluto/ca/router)",
    )


def run(args: argparse.Namespace) -> int:
    """Route until Ctrl-C or SIGTERM.

    Returns:
        0 after a clean stop.

    Raises:
        PlutoError: an endpoint cannot be listened on; with ``--secure``, the router's files are missing or wrong.
    """
    import msgspec
    import zenoh

    from pluto.runtime.runner import stop_on_signals

    if args.tls is not None and not args.secure:
        raise ConfigError("--tls is for a secure router: add --secure")
    if args.thin_robot and not args.thin:
        raise ConfigError("--thin-robot names the robots whose data --thin thins: add --thin IFACE")
    thinning: list[dict[str, Any]] = []
    if args.thin:
        from pluto.bus.fleet import thinning_config

        try:
            thinning = thinning_config(args.thin, args.thin_robot)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    listen: list[str] = args.listen or [DEFAULT_SECURE_LISTEN if args.secure else DEFAULT_LISTEN]
    conf = zenoh.Config()
    conf.insert_json5("mode", '"router"')
    conf.insert_json5("listen/endpoints", msgspec.json.encode(listen).decode())
    conf.insert_json5("listen/exit_on_failure", "true")
    conf.insert_json5("scouting/multicast/enabled", "false")
    # As the bus's sessions (pluto.bus.config): no shared memory. Two routers of one machine would otherwise pass
    # large messages through it rather than their link, and start its watchdog threads.
    conf.insert_json5("transport/shared_memory/enabled", "false")
    if args.connect:
        conf.insert_json5("connect/endpoints", msgspec.json.encode(args.connect).decode())
    if thinning:
        conf.insert_json5("downsampling", msgspec.json.encode(thinning).decode())
    secure = ""
    if args.secure:
        entries, secure = secure_config(args.tls, listen)
        for path, value in entries.items():
            conf.insert_json5(path, msgspec.json.encode(value).decode())
    try:
        session = zenoh.open(conf)
    except zenoh.ZError as err:
        from pluto.bus.session import zenoh_reason

        raise PlutoError(
            f"cannot listen on {', '.join(listen)} (port in use?) or use its settings: {zenoh_reason(err)}"
        ) from None
    with stop_on_signals() as stop:
        endpoint = listen[0].replace("0.0.0.0", "<this host>")
        if secure:
            print(
                f"router listening on {', '.join(listen)}; {secure}. On each enrolled machine set "
                f"PLUTO_CONNECT={endpoint} and PLUTO_TLS=<its folder from pluto certs add>. Ctrl-C stops it.",
                flush=True,
            )
        else:
            print(
                f"router listening on {', '.join(listen)}; set PLUTO_CONNECT={endpoint} on the robot's machines. "
                "Ctrl-C stops it.",
                flush=True,
            )
        if args.connect:
            print(f"linking with the routers at {', '.join(args.connect)}", flush=True)
        if thinning:
            print(
                f"thinning what leaves by {', '.join(args.thin)} for {', '.join(args.thin_robot)}: scans 1 Hz, "
                "sonar and "
                "inertial 2 Hz, poses and odometry 5 Hz",
                flush=True,
            )
        stop.wait()
    session.close()  # type: ignore[no-untyped-call]
    return 0


def secure_config(folder: Path | None, listen: list[str]) -> tuple[dict[str, Any], str]:
    """The Zenoh entries of a secure router, and a line that says whom it admits.

    Args:
        folder: the router's folder (``ca.pem``, ``cert.pem``, ``key.pem``, ``machines.toml``); None: the default.
        listen: the endpoints it will listen on; each must be ``tls/``, at an address its certificate names.

    Raises:
        ConfigError: a plain endpoint, a file missing or wrong, a certificate that is not a router's or does not
            name an address listened on.
    """
    from pluto.bus.access import access_control
    from pluto.bus.certs import (
        CA_CERT,
        MACHINE_CERT,
        MACHINE_KEY,
        MACHINES,
        check_identity,
        default_ca_dir,
        read_machines,
    )
    from pluto.bus.tls import endpoint_address

    explicit = folder is not None
    folder = (folder or default_ca_dir() / "router").expanduser()
    for endpoint in listen:
        if not endpoint.startswith("tls/"):
            raise ConfigError(
                f"--listen {endpoint}: a secure router listens on tls/ endpoints only (a plain one would let anyone "
                "in): use tls/" + endpoint.partition("/")[2]
            )
    if not (folder / MACHINE_CERT).is_file():
        how = "" if explicit else " (or give --tls FOLDER)"
        raise ConfigError(
            f"no router certificate in {folder}: make one with `pluto certs add router --role router --host "
            f"<this machine's address>` on the CA's machine{how}"
        )
    identity = check_identity(folder / CA_CERT, folder / MACHINE_CERT, folder / MACHINE_KEY)
    if identity.role != "router":
        raise ConfigError(
            f"{folder / MACHINE_CERT} is a certificate of a {identity.role or 'machine of no role'} "
            f"({identity.name!r}), not a router's: make one with `pluto certs add NAME --role router --host ADDRESS`"
        )
    for endpoint in listen:
        address = endpoint_address(endpoint)
        if address is None:
            raise ConfigError(f"--listen {endpoint}: expected tls/HOST:PORT")
        host = address[0]
        if host not in ANY_ADDRESS and not _named(host, identity.hosts):
            raise ConfigError(
                f"--listen {endpoint}: the router's certificate names {', '.join(identity.hosts)} but not {host}, "
                f"so machines would refuse it: issue one with --host {host}"
            )
    if not (folder / MACHINES).is_file():
        raise ConfigError(f"{folder / MACHINES} is missing: copy it from the CA's folder (`pluto certs add` writes it)")
    machines = read_machines(folder / MACHINES)
    entries: dict[str, Any] = {
        "transport/link/tls/root_ca_certificate": str(folder / CA_CERT),
        "transport/link/tls/listen_certificate": str(folder / MACHINE_CERT),
        "transport/link/tls/listen_private_key": str(folder / MACHINE_KEY),
        "transport/link/tls/enable_mtls": True,
        "transport/link/tls/close_link_on_expiration": True,
        "access_control": access_control(machines),
    }
    counts = {
        role: sorted(m.name for m in machines if m.role == role and m.revoked is None) for role in ("robot", "viewer")
    }
    admitted = "; ".join(f"{role}s: {', '.join(names) or 'none'}" for role, names in counts.items())
    names = ", ".join(identity.hosts)
    summary = f"secure: mutual TLS with the CA {identity.ca_name!r}, {admitted}; machines connect to {names}"
    return entries, summary


def _named(host: str, names: tuple[str, ...]) -> bool:
    """True if ``host`` is among a certificate's names (addresses compared as addresses)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host.lower() in (n.lower() for n in names)
    for name in names:
        try:
            if ipaddress.ip_address(name) == address:
                return True
        except ValueError:
            continue
    return False

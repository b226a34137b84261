"""``pluto certs``: the robot's certificate authority, and the certificates that let machines onto a secure bus.

``init`` makes the CA, ``add`` issues a machine's certificate into a folder to copy to that machine, ``revoke``
takes a machine's rights away, ``list`` shows the machines issued. See :mod:`pluto.bus.certs` for the files and
:mod:`pluto.bus.access` for what each role may do.
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

from pluto.cli.command import Subparsers, add_parser

__all__ = ["register"]

DESCRIPTION = """\
The certificates of a secure bus (`pluto router --secure`): every machine shows one signed by the robot's own
certificate authority, and the router lets it do what its role allows.

roles:
  robot    runs modules: reads, writes and commands everything of the robot
  viewer   reads every interface, lists modules, calls the services that only read; cannot command
  router   the router's own certificate; give it the addresses machines reach it at with --host

actions:
  init                 make the certificate authority (once; default folder ~/.config/pluto/ca)
  add NAME             issue a certificate to machine NAME, into the folder <CA folder>/NAME: copy that folder to
                       the machine and point PLUTO_TLS (or bus.tls) at it. The router reads the roles when it
                       starts: restart it after adding a machine (copy its folder again if it is elsewhere).
  revoke NAME          the router allows machine NAME nothing from its next start (the name stays taken)
  list                 the machines issued, their roles and expiry

examples:
  pluto certs init
  pluto certs add router --role router --host 192.168.1.10
  pluto certs add robot1 --role robot
  pluto certs add laptop --role viewer
"""

# pluto.bus.certs's ROLES, CA_DAYS and MACHINE_DAYS, repeated so that building the parser does not import the bus
# (a test checks that they agree).
ROLES = ("robot", "viewer", "router")
CA_DAYS = 3650
MACHINE_DAYS = 730


def register(subparsers: Subparsers) -> None:
    """Register ``certs init``, ``certs add``, ``certs revoke`` and ``certs list``."""
    p = add_parser(
        subparsers, "certs", _no_action, "certificates of a secure bus: init, add, revoke, list", DESCRIPTION
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    folder = argparse.ArgumentParser(add_help=False)
    folder.add_argument(
        "--dir", type=Path, metavar="FOLDER", help="the certificate authority's folder (default ~/.config/pluto/ca)"
    )
    init = add_parser(actions, "init", run_init, "make the certificate authority", parents=[folder])
    init.add_argument("--name", default="pluto", help="the CA's name, e.g. the robot's or the fleet's (default pluto)")
    init.add_argument("--days", type=int, default=CA_DAYS, help=f"days it is valid (default {CA_DAYS})")
    add = add_parser(actions, "add", run_add, "issue a machine's certificate", parents=[folder])
    add.add_argument("name", metavar="NAME", help="the machine's name (letters, digits, '-', '.')")
    add.add_argument("--role", choices=ROLES, default="robot", help="what the machine may do (default robot)")
    add.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a router's address or host name as machines connect to it, repeatable (router only)",
    )
    add.add_argument("--days", type=int, default=MACHINE_DAYS, help=f"days it is valid (default {MACHINE_DAYS})")
    revoke = add_parser(actions, "revoke", run_revoke, "revoke a machine's certificate", parents=[folder])
    revoke.add_argument("name", metavar="NAME", help="the machine's name")
    add_parser(actions, "list", run_list, "list the machines issued", parents=[folder])


def _no_action(_args: argparse.Namespace) -> int:  # argparse requires an action before this could run
    return 2


def _folder(args: argparse.Namespace) -> Path:
    from pluto.bus.certs import default_ca_dir

    return Path(args.dir).expanduser() if args.dir else default_ca_dir()


def run_init(args: argparse.Namespace) -> int:
    """Make the CA.

    Raises:
        ConfigError: a CA is there already, or the folder cannot be written.
    """
    from pluto.bus.certs import CA_KEY, init_ca

    ca = init_ca(_folder(args), args.name, args.days)
    print(f"certificate authority {ca.name!r} made in {ca.directory}", flush=True)
    print(f"  {ca.directory / CA_KEY}: its private key; keep it on this machine, never copy it", flush=True)
    print(f"  next: pluto certs add NAME --role robot|viewer|router{_dir_option(args)}", flush=True)
    return 0


def run_add(args: argparse.Namespace) -> int:
    """Issue a machine's certificate.

    Raises:
        ConfigError: no CA, a bad name, role or host, or the name is taken.
    """
    from pluto.bus.certs import add_machine

    folder = add_machine(_folder(args), args.name, args.role, args.host, args.days)
    print(f"{args.role} {args.name!r}: certificate in {folder} (ca.pem, cert.pem, key.pem)", flush=True)
    if args.role == "router":
        address = args.host[0] if args.host else "<address>"
        print(
            f"  on the router's machine: pluto router --secure --tls {folder} --listen tls/{address}:7447",
            flush=True,
        )
    else:
        print(
            f"  copy the folder to that machine (e.g. scp -r {folder} {args.name}:.config/pluto/tls), and there:\n"
            "  export PLUTO_TLS=~/.config/pluto/tls PLUTO_CONNECT=tls/<router's address>:7447",
            flush=True,
        )
        print("  restart the router so that it admits this machine", flush=True)
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    """Revoke a machine's certificate.

    Raises:
        ConfigError: no CA, no such machine, or revoked already.
    """
    from pluto.bus.certs import CertificateAuthority

    CertificateAuthority(_folder(args)).revoke(args.name)
    print(
        f"{args.name!r} revoked: restart the router (copy its folder again if it is elsewhere); from then on it "
        "allows that machine nothing",
        flush=True,
    )
    return 0


def run_list(args: argparse.Namespace) -> int:
    """List the machines issued.

    Raises:
        ConfigError: no CA.
    """
    from pluto.bus.certs import CertificateAuthority

    ca = CertificateAuthority(_folder(args))
    machines = ca.machines()
    now = datetime.datetime.now(datetime.UTC)
    print(f"certificate authority {ca.name!r} in {ca.directory}: {len(machines)} machine(s)")
    if machines:
        width = max(len(m.name) for m in machines)
        print(f"{'NAME':<{width}}  {'ROLE':<6}  EXPIRES")
        for m in machines:
            state = " (expired)" if m.expires < now else ""
            if m.revoked is not None:
                state += f" (revoked {m.revoked:%Y-%m-%d})"
            print(f"{m.name:<{width}}  {m.role:<6}  {m.expires:%Y-%m-%d}{state}")
    return 0


def _dir_option(args: argparse.Namespace) -> str:
    return f" --dir {args.dir}" if args.dir else ""

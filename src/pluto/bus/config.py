"""How a process joins the bus: robot name, endpoints, and the Zenoh configuration built from them.

Strategy: on one machine, with nothing configured, every process is a Zenoh peer that listens on a random loopback
port and also tries to own a well-known loopback *rendezvous* port (``tcp/127.0.0.1:7448``). The process that gets
the port runs its session as a Zenoh router: newcomers connect to it first and it brokers for them at once; Zenoh's
gossip then links every peer to every other, so the mesh survives the owner's death, and the next process to start
takes the port over. No extra process, no multicast (which
many networks and containers block), nothing reachable from outside the machine.

Across machines a Zenoh router (``pluto router``) is the meeting point: set ``connect`` (``PLUTO_CONNECT``) to its
endpoint on every machine and the same code runs unchanged. With ``connect`` set, a process is a Zenoh *client* of
that router unless told otherwise (``mode``, ``PLUTO_MODE``): a peer would also try to link to every other peer at
the addresses they listen on, which other machines often cannot reach (a peer listens on the loopback by default),
and a peer linked only to the router is not sent what the router's other peers write. ``mode = "peer"`` with a
reachable ``listen`` address suits machines that all reach each other; ``mode = "router"`` makes the process a router
itself (a robot's own router that links to another).

On a network that is not trusted the router runs secure (``pluto router --secure``): it listens on ``tls/``
endpoints, admits only machines holding a certificate of the robot's CA, and lets each do what its role allows
(:mod:`pluto.bus.certs`, :mod:`pluto.bus.access`). Every other process then connects to a ``tls/`` endpoint with
its machine's CA certificate, certificate and key (``tls``: a folder made by ``pluto certs add``, or the three
paths; ``PLUTO_TLS``, ``PLUTO_TLS_CA``, ``PLUTO_TLS_CERT``, ``PLUTO_TLS_KEY``). The local rendezvous of one machine
stays on the loopback and needs none of it.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from pluto.errors import ConfigError

DEFAULT_ROBOT = "pluto"
DEFAULT_RENDEZVOUS = "tcp/127.0.0.1:7448"
MODES = ("auto", "peer", "client", "router")
"""Values of ``mode``: "auto" is "client" when ``connect`` is set and "peer" otherwise."""

ENVIRONMENT = {
    "PLUTO_ROBOT": "robot name; keys are pluto/<robot>/<interface> (default pluto)",
    "PLUTO_CONNECT": "router endpoints to connect to, comma-separated, e.g. tcp/192.168.1.10:7447",
    "PLUTO_MODE": "auto (default), peer, client or router; auto is client when PLUTO_CONNECT is set, else peer",
    "PLUTO_LISTEN": "endpoints this process listens on, comma-separated (default tcp/127.0.0.1:0)",
    "PLUTO_RENDEZVOUS": "loopback endpoint where local processes meet (default tcp/127.0.0.1:7448; empty: none)",
    "PLUTO_MULTICAST": "1 to also discover peers by UDP multicast scouting (default 0)",
    "PLUTO_LEASE": "seconds a link that brings nothing is kept before it is closed (default 10)",
    "PLUTO_TLS": "folder of this machine's certificate (from pluto certs add): ca.pem, cert.pem, key.pem",
    "PLUTO_TLS_CA": "the robot's CA certificate, for tls/ endpoints (overrides PLUTO_TLS's ca.pem)",
    "PLUTO_TLS_CERT": "this machine's certificate, for tls/ endpoints (overrides PLUTO_TLS's cert.pem)",
    "PLUTO_TLS_KEY": "this machine's private key, for tls/ endpoints (overrides PLUTO_TLS's key.pem)",
}
"""The bus's environment variables and what each sets (they override the ``[bus]`` table)."""


TLS_FILES = {"ca": "ca.pem", "cert": "cert.pem", "key": "key.pem"}
"""The files of a machine's folder made by ``pluto certs add``, by their settings in ``[bus.tls]``."""


def check_robot_name(name: str, what: str = "") -> str:
    """Return ``name`` if it can be a robot's name on the bus (the ``<robot>`` of ``pluto/<robot>/...``).

    Args:
        what: what the name is, to start the message with (``"bus.robot "``).

    Raises:
        ConfigError: empty, or containing one of ``/ * $ ? # @`` or white space.
    """
    if not name or any(c in name for c in "/*$?#@") or any(c.isspace() for c in name):
        raise ConfigError(f"{what}{name!r}: a robot name may not be empty or contain / * $ ? # @ or spaces")
    return name


class TlsFiles(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A machine's TLS files (absolute paths), for links to a secure router.

    Attributes:
        ca: the robot's CA certificate (PEM): the router's certificate must be signed by it.
        cert: this machine's certificate (PEM), signed by the CA; its common name is the machine's name.
        key: this machine's private key (PEM).
    """

    ca: str
    cert: str
    key: str

    @classmethod
    def folder(cls, path: str | os.PathLike[str]) -> TlsFiles:
        """The files of a folder made by ``pluto certs add`` (``ca.pem``, ``cert.pem``, ``key.pem``)."""
        where = Path(path).expanduser().absolute()
        return cls(**{field: str(where / name) for field, name in TLS_FILES.items()})


class BusConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Settings of the ``[bus]`` section of the configuration file (or the ``PLUTO_*`` environment variables).

    Attributes:
        robot: name of the robot; keys are ``pluto/<robot>/<interface>`` so robots can share a network.
        connect: endpoints to connect to (a router, e.g. ``tcp/192.168.1.10:7447``). When set, the local
            rendezvous is not used and an unreachable endpoint is an error.
        listen: endpoints this process listens on.
        rendezvous: the loopback endpoint that local peers meet at when ``connect`` is empty; "" disables it.
        multicast: also discover peers by UDP multicast scouting.
        mode: "auto" (default: "client" when ``connect`` is set, else "peer"), "peer" (links directly to the other
            peers too), "client" (everything through the router in ``connect``) or "router" (routes for others).
        connect_timeout: seconds to wait for ``connect`` endpoints at start.
        lease: seconds a link to another process may bring nothing (not even the keep-alives sent several times
            within it) before it is closed as dead. It only decides for a process that is frozen or on a machine
            that vanished: on one machine a process that ends closes its links at once, and the supervisor tells a
            module that stopped stepping by its MOM entries. A starved process (a busy laptop: its Zenoh thread
            waiting for the CPU or for Python's lock) reads its links late, so a short lease closed links between
            live processes; a closed link is opened again (see :func:`zenoh_config_json`).
        tls: this machine's certificate, for ``tls/`` endpoints in ``connect`` (a secure router); None: none. In
            the file either a folder made by ``pluto certs add`` (``tls = "~/.config/pluto/tls"``) or a table of
            the three paths (``[bus.tls]`` with ``ca``, ``cert``, ``key``).
    """

    robot: str = DEFAULT_ROBOT
    connect: list[str] = msgspec.field(default_factory=list)
    listen: list[str] = msgspec.field(default_factory=lambda: ["tcp/127.0.0.1:0"])
    rendezvous: str = DEFAULT_RENDEZVOUS
    multicast: bool = False
    mode: str = "auto"
    connect_timeout: float = 2.0
    lease: float = 10.0
    tls: TlsFiles | None = None

    def __post_init__(self) -> None:
        check_robot_name(self.robot, "bus.robot ")
        if self.mode not in MODES:
            raise ConfigError(f"bus.mode {self.mode!r}: expected one of {', '.join(MODES)}")
        if not 0.1 <= self.lease <= 3600:
            raise ConfigError(f"bus.lease {self.lease!r}: expected seconds from 0.1 to 3600")
        if self.mode == "client" and not self.connect:
            raise ConfigError("bus.mode 'client' needs bus.connect (the router's endpoint)")
        for endpoint in self.connect:
            if self.tls is not None and endpoint.startswith("tcp/"):
                raise ConfigError(
                    f"bus.connect {endpoint}: bus.tls is set, so the router is a secure one: use "
                    f"tls/{endpoint.removeprefix('tcp/')} (a plain tcp/ link would go unencrypted)"
                )
            if self.tls is None and endpoint.startswith("tls/"):
                raise ConfigError(
                    f"bus.connect {endpoint}: a tls/ endpoint needs this machine's certificate: set bus.tls or "
                    "PLUTO_TLS to the folder `pluto certs add` made for this machine"
                )

    @property
    def zenoh_mode(self) -> str:
        """The Zenoh mode this process runs in: ``mode``, with "auto" resolved."""
        if self.mode == "auto":
            return "client" if self.connect else "peer"
        return self.mode


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def bus_config(section: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> BusConfig:
    """Build the bus settings from a ``[bus]`` table overridden by the environment.

    Environment: ``PLUTO_ROBOT``, ``PLUTO_CONNECT`` (comma-separated), ``PLUTO_MODE``, ``PLUTO_LISTEN``
    (comma-separated), ``PLUTO_RENDEZVOUS``, ``PLUTO_MULTICAST`` (1/0), ``PLUTO_LEASE`` (s), ``PLUTO_TLS`` (a
    folder), ``PLUTO_TLS_CA``, ``PLUTO_TLS_CERT``, ``PLUTO_TLS_KEY`` (files, each over the folder's); see
    :data:`ENVIRONMENT`.

    Raises:
        ConfigError: a value has the wrong type or is not allowed.
    """
    env = dict(os.environ) if env is None else env
    merged: dict[str, Any] = dict(section or {})
    if env.get("PLUTO_ROBOT"):
        merged["robot"] = env["PLUTO_ROBOT"]
    if env.get("PLUTO_CONNECT"):
        merged["connect"] = _split(env["PLUTO_CONNECT"])
    if env.get("PLUTO_MODE"):
        merged["mode"] = env["PLUTO_MODE"].strip().lower()
    if env.get("PLUTO_LISTEN"):
        merged["listen"] = _split(env["PLUTO_LISTEN"])
    if "PLUTO_RENDEZVOUS" in env:
        merged["rendezvous"] = env["PLUTO_RENDEZVOUS"]
    if env.get("PLUTO_MULTICAST"):
        merged["multicast"] = env["PLUTO_MULTICAST"].lower() in ("1", "true", "yes", "on")
    if env.get("PLUTO_LEASE"):
        try:
            merged["lease"] = float(env["PLUTO_LEASE"])
        except ValueError:
            raise ConfigError(f"PLUTO_LEASE {env['PLUTO_LEASE']!r}: expected seconds") from None
    tls = _tls_table(merged.get("tls"))
    if env.get("PLUTO_TLS"):
        tls = msgspec.structs.asdict(TlsFiles.folder(env["PLUTO_TLS"]))
    files = {"ca": env.get("PLUTO_TLS_CA"), "cert": env.get("PLUTO_TLS_CERT"), "key": env.get("PLUTO_TLS_KEY")}
    for field, path in files.items():
        if path:
            tls = {**(tls or {}), field: str(Path(path).expanduser().absolute())}
    if tls is not None:
        missing = [field for field in TLS_FILES if not tls.get(field)]
        if missing:
            raise ConfigError(
                f"bus.tls needs ca, cert and key: {', '.join(missing)} missing (or give the folder `pluto certs "
                'add` made: tls = "<folder>", PLUTO_TLS=<folder>)'
            )
        merged["tls"] = tls
    try:
        return msgspec.convert(merged, BusConfig)
    except msgspec.ValidationError as err:
        raise ConfigError(f"[bus] {err}") from None


def _tls_table(value: Any) -> dict[str, Any] | None:
    """The ``tls`` setting of a ``[bus]`` table as a table of absolute paths (a folder's files for a string)."""
    if value is None:
        return None
    if isinstance(value, str):
        return msgspec.structs.asdict(TlsFiles.folder(value)) if value else None
    if isinstance(value, dict):
        return {k: str(Path(v).expanduser().absolute()) if isinstance(v, str) and v else v for k, v in value.items()}
    raise ConfigError(f"[bus] tls: expected a folder (a string) or a table of ca, cert and key, got {value!r}")


def _tcp_port_free(endpoint: str) -> bool:
    """True if nothing listens on a ``tcp/<host>:<port>`` endpoint (so this process would own it)."""
    try:
        host, port = endpoint.removeprefix("tcp/").rsplit(":", 1)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host.strip("[]"), int(port)))
        return True
    except (OSError, ValueError):
        return False


def rendezvous_used(cfg: BusConfig) -> bool:
    """True if this process meets the others at the local rendezvous (as its owner or a newcomer)."""
    return bool(cfg.rendezvous) and not cfg.connect and cfg.zenoh_mode == "peer"


def _registry(cfg: BusConfig) -> Path:
    """The folder where the sessions that meet at ``cfg.rendezvous`` list themselves, one file each."""
    place = "".join(c if c.isalnum() or c == "." else "_" for c in cfg.rendezvous)
    return Path(tempfile.gettempdir()) / f"pluto-{getattr(os, 'getuid', lambda: 0)()}" / place


def register_session(cfg: BusConfig, zid: str) -> Path | None:
    """List session ``zid`` of this process among those meeting at the rendezvous (a file named after it, holding
    the pid); return the file, for :func:`unregister_session`, or None if the rendezvous is not used or the
    folder cannot be written.

    A process that takes the rendezvous over after its owner died reads the list (:func:`registered_sessions`) to
    know whom to expect as the others reconnect to it."""
    if not rendezvous_used(cfg):
        return None
    path = _registry(cfg) / zid
    for _ in range(2):  # the folder may be removed by a session leaving just then
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            path.write_text(str(os.getpid()))
            return path
        except FileNotFoundError:
            continue
        except OSError:
            return None
    return None


def unregister_session(path: Path | None) -> None:
    """Take a session off the list (and the folder, once empty)."""
    if path is None:
        return
    with contextlib.suppress(OSError):
        path.unlink()
    with contextlib.suppress(OSError):
        path.parent.rmdir()


def registered_sessions(cfg: BusConfig) -> set[str]:
    """The zids of the sessions listed at the rendezvous whose processes are alive (the files of dead ones go)."""
    found: set[str] = set()
    try:
        entries = list(_registry(cfg).iterdir())
    except OSError:
        return found
    for entry in entries:
        try:
            pid = int(entry.read_text())
            os.kill(pid, 0)
        except (OSError, ValueError) as err:
            if not isinstance(err, PermissionError):  # a process of another user is alive
                with contextlib.suppress(OSError):
                    entry.unlink()
                continue
        found.add(entry.name)
    return found


def rendezvous_free(cfg: BusConfig) -> bool:
    """True if this process would own the local rendezvous (nothing listens on it yet)."""
    return rendezvous_used(cfg) and _tcp_port_free(cfg.rendezvous)


def zenoh_config_json(cfg: BusConfig, owner: bool = False) -> dict[str, Any]:
    """Return the Zenoh configuration entries (key path -> value) for these settings.

    A link closed while both ends live (a lease that ran out on a starved process) is opened again: a newcomer
    retries the rendezvous for as long as it runs (every 100-250 ms; Zenoh reconnects to the endpoints of
    ``connect``), and peers that were linked directly link again when gossip tells them of each other, while the
    rendezvous owner routes between them meanwhile. Over the new link each side declares its subscribers,
    queryables and liveliness tokens again, so readers, services and module tokens resume with no state lost.

    Args:
        owner: claim the local rendezvous endpoint (see :func:`rendezvous_free`) instead of connecting to it.
    """
    mode = cfg.zenoh_mode
    entries: dict[str, Any] = {
        "mode": mode,
        "scouting/multicast/enabled": cfg.multicast,
        # A killed process drops its TCP links at once; the lease only matters for a frozen process or a vanished
        # machine, and must outlast the time a live process on a busy machine may read its links late (see
        # BusConfig.lease). Keep-alives at least once a second: a sender that was held up is heard soon after.
        "transport/link/tx/lease": int(cfg.lease * 1000),
        "transport/link/tx/keep_alive": max(4, math.ceil(cfg.lease)),
        # Pluto's messages are small and copied out of the buffers at once: no shared memory (and none of its
        # watchdog threads).
        "transport/shared_memory/enabled": False,
    }
    if cfg.tls is not None:
        # Mutual TLS: the router's certificate must be signed by the robot's CA and name the address connected to
        # (Zenoh checks the name by default); this machine shows its own. A link stays up no longer than the
        # certificates on it are valid.
        entries["transport/link/tls/root_ca_certificate"] = cfg.tls.ca
        entries["transport/link/tls/connect_certificate"] = cfg.tls.cert
        entries["transport/link/tls/connect_private_key"] = cfg.tls.key
        entries["transport/link/tls/enable_mtls"] = True
        entries["transport/link/tls/close_link_on_expiration"] = True
    if cfg.connect:
        entries["connect/endpoints"] = list(cfg.connect)
        entries["connect/timeout_ms"] = int(cfg.connect_timeout * 1000)
        entries["connect/exit_on_failure"] = True
        entries["listen/endpoints"] = [] if mode == "client" else list(cfg.listen)
        entries["listen/exit_on_failure"] = True
    elif mode == "router":
        # A router of its own with nothing to connect to: it listens where told, and local peers may reach it
        # only if one of those endpoints is the rendezvous.
        entries["listen/endpoints"] = list(cfg.listen)
        entries["listen/exit_on_failure"] = True
    else:
        listen = list(cfg.listen)
        if cfg.rendezvous:
            listen = [cfg.rendezvous, *listen]
            if owner:
                # Claim the rendezvous as a router: it brokers between peers that are not linked directly yet,
                # so a newcomer sees every module as soon as it is linked to the rendezvous. Opening fails if
                # another process took the port meanwhile, and the caller then joins as a newcomer.
                entries["mode"] = "router"
                entries["scouting/delay"] = 0
                entries["listen/exit_on_failure"] = True
            else:
                # A newcomer waits until it is linked, so that its first reads already see the running modules.
                entries["connect/endpoints"] = [cfg.rendezvous]
                entries["connect/exit_on_failure"] = False
                entries["connect/timeout_ms"] = int(cfg.connect_timeout * 1000)
                entries["connect/retry"] = {"period_init_ms": 100, "period_max_ms": 250, "period_increase_factor": 2}
                entries["listen/exit_on_failure"] = False
        entries["listen/endpoints"] = listen
    return entries

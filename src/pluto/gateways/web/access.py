"""Which ``Host`` a request to ``pluto web`` may name: the defence against DNS rebinding, as a pure core.

Strategy: a web page the user visits cannot read or drive a server on the user's computer by itself (the browser
keeps pages of one origin from reading another's), but it can change what its own name means: a hostile site
``evil.example`` answers a DNS query for its name with 127.0.0.1 once its page is loaded, and from then on the page
talks to ``http://evil.example:8080/``, which is this server, as its own origin. Every such request still carries
the name the page used, in ``Host`` (RFC 9110 §7.2) and, for a WebSocket, in ``Origin`` (RFC 6455 §10.2): so the
server answers only requests whose ``Host`` is a name it is really reached by, and the check of ``Origin`` (equal
to ``Host``) follows. An address written as digits (``127.0.0.1``, ``[::1]``, ``192.168.1.5``) is no name a site
can own, so the names allowed are:

- the loopback ones: ``localhost``, ``127.0.0.1`` (any 127.x.y.z) and ``[::1]``;
- the address the server binds (``--bind``, as ``pluto web`` prints it, 0.0.0.0 included), and the address a
  connection actually arrived at (what a browser names when the server binds every address and is opened by one
  of this computer's addresses);
- the names and addresses given with ``--allow-host`` (the computer's name on the network, a reverse proxy's).

The port is not compared: a rebinding page names this server's port itself, and a browser omits a default one.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["LOOPBACK_NAMES", "HostPolicy", "allowed_name", "host_name"]

LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "::1")
"""Names every server answers to: they always mean this computer."""

_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")
"""A DNS name, lowercase, without the final dot."""

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _address(name: str) -> IpAddress | None:
    """The IP address ``name`` writes (an IPv4 address mapped into IPv6 as the IPv4 one), or None for a name."""
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _canonical(name: str) -> str:
    """``name`` lowercase, without a final dot; an address in its shortest form."""
    name = name.lower()
    if name.endswith("."):
        name = name[:-1]
    address = _address(name)
    return str(address) if address is not None else name


def host_name(header: str) -> str | None:
    """The name of a ``Host`` header without its port: lowercase, without brackets or a final dot, an address in its
    shortest form (``[0:0::1]:8080`` gives ``::1``); None when the header is not ``host[:port]``."""
    text = header.strip()
    if text.startswith("["):
        end = text.find("]")
        name, rest = text[1:end], text[end + 1 :]
        if end < 0 or _address(name) is None:
            return None
    else:
        name, colon, port = text.partition(":")
        rest = colon + port
    if rest and not (rest.startswith(":") and (rest[1:].isdigit() or rest == ":") and len(rest) <= 6):
        return None
    name = _canonical(name)
    return name if name and (_address(name) is not None or _NAME.fullmatch(name)) else None


def allowed_name(value: str) -> str:
    """A name or address given to ``--allow-host``, as :func:`host_name` writes it.

    Raises:
        ValueError: not a bare name or address (a port, a scheme, a path, a wildcard), with what to give instead.
    """
    text = value.strip()
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if _address(bare) is not None:
        return _canonical(bare)
    name = _canonical(text)
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"allowed host {value!r} is not a host name or an address: give one like robot.local or 192.168.1.5, "
            "without a scheme or a port"
        )
    return name


class HostPolicy:
    """The names a request's ``Host`` may give.

    Args:
        bind: the address the server listens on.
        allowed: more names or addresses (``--allow-host``).

    Raises:
        ValueError: an allowed name that is not a bare name or address (see :func:`allowed_name`).
    """

    def __init__(self, bind: str, allowed: Iterable[str] = ()) -> None:
        names = set(LOOPBACK_NAMES)
        if bind.strip():
            names.add(_canonical(bind.strip().strip("[]")))
        names.update(allowed_name(name) for name in allowed)
        self.names: frozenset[str] = frozenset(names)
        """Every name allowed besides the loopback addresses and the address a connection arrived at."""

    def allows(self, header: str | None, local: str | None = None) -> bool:
        """Whether a request may be answered.

        Args:
            header: its ``Host`` header (None: it had none, as no browser sends).
            local: the address its connection arrived at (the socket's own address).
        """
        name = host_name(header) if header is not None else None
        if name is None:
            return False
        if name in self.names:
            return True
        address = _address(name)
        if address is None:
            return False
        return address.is_loopback or (local is not None and address == _address(local.partition("%")[0]))

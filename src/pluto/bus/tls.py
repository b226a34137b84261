"""A machine's side of a secure bus: its TLS files checked before use, and a refused link explained in one line.

Strategy: Zenoh reads the files only when it opens a link and, when the link fails, says little more than that it
could not connect ("Unable to connect to any of [...]. Timeout!"). So before opening, :func:`check_files` reads the
files itself and says which one is missing, damaged, expired or from another CA. When opening still fails,
:func:`diagnose` opens a TLS connection of its own to the router's endpoint with the same files (Python's ``ssl``:
Zenoh's ``tls/`` link is TLS over TCP, with Zenoh's protocol inside) and reports what the handshake says: nothing
listens there, this machine refused the router's certificate (another CA, a name that is not the address
connected to, expired), or the router refused this machine's (no certificate, another CA, expired).
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

from pluto.bus.certs import Identity, check_identity
from pluto.bus.config import TlsFiles
from pluto.errors import ConfigError

__all__ = ["check_files", "diagnose", "endpoint_address"]

PROBE_TIMEOUT = 3.0
"""s the handshake of :func:`diagnose` may take."""
REFUSAL_WAIT = 1.0
"""s :func:`diagnose` waits after its handshake for the router to refuse this machine's certificate (TLS 1.3 tells
the client after the handshake) before it counts the certificate as accepted."""


def check_files(files: TlsFiles) -> Identity:
    """Check a machine's TLS files (see :func:`pluto.bus.certs.check_identity`) and return who they say it is.

    Raises:
        ConfigError: the first problem, as ``bus.tls: <what is wrong>``.
    """
    try:
        return check_identity(Path(files.ca), Path(files.cert), Path(files.key))
    except ConfigError as err:
        raise ConfigError(f"bus.tls: {err}") from None


def endpoint_address(endpoint: str) -> tuple[str, int] | None:
    """(host, port) of a ``tls/HOST:PORT`` endpoint (Zenoh's options after ``#`` or ``?`` ignored), or None."""
    if not endpoint.startswith("tls/"):
        return None
    address = endpoint.removeprefix("tls/").split("#", 1)[0].split("?", 1)[0]
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def diagnose(endpoint: str, files: TlsFiles, timeout: float = PROBE_TIMEOUT) -> str:
    """Why a TLS link to ``endpoint`` fails, in a few words; "" if a handshake with these files succeeds.

    Args:
        endpoint: a ``tls/HOST:PORT`` endpoint (anything else: "").
        files: this machine's CA certificate, certificate and key.
    """
    address = endpoint_address(endpoint)
    if address is None:
        return ""
    host, port = address
    try:
        context = ssl.create_default_context(cafile=files.ca)
        context.load_cert_chain(files.cert, files.key)
    except (OSError, ssl.SSLError) as err:
        return f"the TLS files cannot be used: {err}"
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host) as link,
        ):
            link.settimeout(REFUSAL_WAIT)
            try:
                link.recv(1)  # the router sends nothing before this side speaks, unless it refuses
            except TimeoutError:
                return ""
            return f"the router at {host}:{port} closed the link after the TLS handshake"
    except ssl.SSLCertVerificationError as err:
        return _server_refused(host, err)
    except ssl.SSLError as err:
        reason = (err.reason or str(err)).lower().replace("_", " ")
        return (
            f"the router at {host}:{port} refused this machine's certificate ({reason}): it admits only "
            "certificates of its own CA that are still valid"
        )
    except ConnectionRefusedError:
        return f"nothing listens at {host}:{port} (is `pluto router --secure` running there?)"
    except TimeoutError:
        return f"{host}:{port} does not answer (a firewall, or the wrong address?)"
    except OSError as err:
        return f"cannot reach {host}:{port}: {err.strerror or err}"


def _server_refused(host: str, err: ssl.SSLCertVerificationError) -> str:
    why = err.verify_message or str(err)
    if "mismatch" in why:
        hint = (
            f"the router's certificate does not name {host}: issue it with `pluto certs add NAME --role router "
            f"--host {host}`, or connect to a name it holds"
        )
    elif "issuer" in why:
        hint = "the router's certificate is not from this machine's CA (bus.tls ca): are they of the same robot?"
    elif "expired" in why:
        hint = "the router's certificate has expired: issue it a new one"
    else:
        hint = "this machine does not accept the router's certificate"
    return f"{hint} ({why})"

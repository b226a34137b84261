"""The robot's certificate authority: the keys and certificates that let a machine onto a secure bus.

Strategy: a secure bus (``pluto router --secure``) speaks TLS both ways (mutual TLS): the router shows a certificate,
every machine shows one too, and each side accepts only certificates signed by the robot's own certificate
authority (CA), made once by ``pluto certs init``. Nothing else is trusted: not the system's CAs, not another
robot's. The router then lets each machine do what its *role* allows (:mod:`pluto.bus.access`), telling machines
apart by the common name (CN) of their certificate, the machine's name.

The CA's folder holds::

    ca.pem           the CA's certificate (public: every machine gets a copy)
    ca.key           the CA's private key (0600; never leaves this folder)
    machines.toml    every machine issued: name, role, serial number, expiry, revocation (the router's roles come
                     from it)
    NAME/            one folder per machine, to copy to that machine: ca.pem, cert.pem, key.pem (0600)

The role is written into the certificate too (its organizational unit), so a machine knows its own role (a viewer
is told at once that it cannot command) and a certificate says what it is for. A router's folder also gets a copy
of ``machines.toml``, refreshed whenever a machine is added, because the router's access control is built from it
when it starts (Zenoh cannot change access control while it runs: restart the router after adding a machine).

Keys are ECDSA P-256 (what every TLS stack accepts, small and fast to check), made with the ``cryptography``
package. A router's certificate names the addresses machines reach it at (subject alternative names, checked by
the connecting side, so no other enrolled machine can pose as the router); a machine's certificate is good for
client authentication only, a router's for server authentication only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import ipaddress
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pluto.errors import ConfigError

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

__all__ = [
    "CA_CERT",
    "CA_KEY",
    "MACHINES",
    "ROLES",
    "CertificateAuthority",
    "Identity",
    "Machine",
    "add_machine",
    "check_identity",
    "default_ca_dir",
    "init_ca",
    "read_machines",
]

ROLES = ("robot", "viewer", "router")
"""What a machine may be: a ``robot`` machine runs modules (reads, writes and commands everything of the robot), a
``viewer`` reads and watches but cannot command, a ``router`` is the router's own certificate (allowed nothing as a
client)."""

CA_CERT = "ca.pem"
CA_KEY = "ca.key"
MACHINES = "machines.toml"
MACHINE_CERT = "cert.pem"
MACHINE_KEY = "key.pem"

CA_DAYS = 3650
"""Days the CA's certificate is valid by default (ten years)."""
MACHINE_DAYS = 730
"""Days a machine's certificate is valid by default (two years)."""
ROUTER_LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
"""Names every router certificate holds besides its own and ``--host``: processes on the router's machine reach it
on the loopback."""

_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,62})")
_SKEW = datetime.timedelta(minutes=5)
"""Certificates start this long before they are made: a machine whose clock is a little behind accepts them."""


def default_ca_dir() -> Path:
    """Where ``pluto certs`` keeps the CA without ``--dir``: ``~/.config/pluto/ca``, beside the configuration file."""
    return Path.home() / ".config" / "pluto" / "ca"


def check_machine_name(name: str) -> str:
    """Return ``name`` if it can name a machine (its certificate's CN and its folder).

    Raises:
        ConfigError: empty, longer than 63 characters, or with characters other than letters, digits, ``-`` and
            ``.`` (a name that is also a valid host name).
    """
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise ConfigError(
            f"machine name {name!r}: use 1 to 63 letters, digits, '-' or '.', starting with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class Machine:
    """A machine the CA issued a certificate to.

    Attributes:
        name: the machine's name, the certificate's common name.  role: one of :data:`ROLES`.
        serial: the certificate's serial number (hex).  expires: when it stops being valid (UTC).
        revoked: when it was revoked (``pluto certs revoke``; the router then allows it nothing), or None.
    """

    name: str
    role: str
    serial: str
    expires: datetime.datetime
    revoked: datetime.datetime | None = None


@dataclass(frozen=True)
class Identity:
    """A machine's certificate, checked: who it says this machine is.

    Attributes:
        name: the certificate's common name.  role: its role (from the organizational unit; "" if it has none).
        expires: when it stops being valid (UTC).  ca_name: the common name of the CA that signed it.
        hosts: the host names and addresses it names (a router's), as text.
    """

    name: str
    role: str
    expires: datetime.datetime
    ca_name: str
    hosts: tuple[str, ...] = ()


def _now(now: datetime.datetime | None) -> datetime.datetime:
    return now if now is not None else datetime.datetime.now(datetime.UTC)


def _write_private(path: Path, data: bytes) -> None:
    """Write a private key readable by its owner only (0600 from the start: never readable by others meanwhile)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    os.chmod(path, 0o600)  # whatever the umask


def _new_key() -> ec.EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _load_cert(path: Path, what: str) -> x509.Certificate:
    from cryptography import x509

    data = _read(path, what)
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError:
        raise ConfigError(f"{what} {path} is not a PEM certificate") from None


def _load_key(path: Path, what: str) -> ec.EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    data = _read(path, what)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise ConfigError(f"{what} {path} is not an unencrypted PEM private key") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ConfigError(f"{what} {path} is not an elliptic-curve key (pluto certs makes those)")
    return key


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path} is a folder, not a file") from None
    except OSError as err:
        raise ConfigError(f"cannot read {what} {path}: {err.strerror or err}") from None


def _common_name(name: x509.Name) -> str:
    from cryptography.x509.oid import NameOID

    values = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(values[0].value) if values else ""


def _role_of(cert: x509.Certificate) -> str:
    from cryptography.x509.oid import NameOID

    values = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)
    return str(values[0].value) if values else ""


class CertificateAuthority:
    """The CA in a folder (see the module docstring), once made by :func:`init_ca`.

    Args:
        directory: the CA's folder.

    Raises:
        ConfigError: there is no CA there (with the command that makes one), or its files are damaged.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        if not (directory / CA_CERT).is_file() or not (directory / CA_KEY).is_file():
            raise ConfigError(f"no certificate authority in {directory}: make one with `pluto certs init`")
        self.cert = _load_cert(directory / CA_CERT, "the CA certificate")
        self.key = _load_key(directory / CA_KEY, "the CA key")
        self.name = _common_name(self.cert.subject)

    def machines(self) -> list[Machine]:
        """The machines issued so far, in the order they were added."""
        return read_machines(self.directory / MACHINES)

    def issue(
        self,
        name: str,
        role: str,
        hosts: Iterable[str] = (),
        days: int = MACHINE_DAYS,
        now: datetime.datetime | None = None,
    ) -> Path:
        """Issue a certificate to machine ``name`` and return its folder (``<CA folder>/<name>``).

        Args:
            name: the machine's name (:func:`check_machine_name`), its certificate's common name.
            role: one of :data:`ROLES`.
            hosts: a router's host names and IP addresses, as machines will write them in ``tls/HOST:PORT``
                (only for a router).
            days: how long the certificate is valid.
            now: when it starts (default: now; a test makes one that has expired).

        Raises:
            ConfigError: a bad name, role, host or number of days; the name is taken.
        """
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        check_machine_name(name)
        if role not in ROLES:
            raise ConfigError(f"role {role!r}: expected one of {', '.join(ROLES)}")
        hosts = list(hosts)
        if hosts and role != "router":
            raise ConfigError("--host names the addresses of a router: only a router's certificate has them")
        if not 1 <= days <= 36500:
            raise ConfigError(f"--days {days}: expected 1 to 36500")
        taken = {m.name: m for m in self.machines()}
        if name in taken:
            raise ConfigError(
                f"machine {name!r} already has a certificate (role {taken[name].role}, folder "
                f"{self.directory / name}): choose another name"
            )
        folder = self.directory / name
        if folder.exists():
            raise ConfigError(f"{folder} already exists: choose another name or move it away")
        start = _now(now) - _SKEW
        key = _new_key()
        subject = x509.Name(
            [
                x509.NameAttribute(NameOID.COMMON_NAME, name),
                x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, self.name),
            ]
        )
        usage = ExtendedKeyUsageOID.SERVER_AUTH if role == "router" else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + _SKEW + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
        )
        if role == "router":
            builder = builder.add_extension(
                x509.SubjectAlternativeName(_alt_names([name, *hosts, *ROUTER_LOCAL_NAMES])), critical=False
            )
        cert = builder.sign(self.key, hashes.SHA256())
        folder.mkdir(mode=0o700)
        (folder / CA_CERT).write_bytes(_cert_pem(self.cert))
        (folder / MACHINE_CERT).write_bytes(_cert_pem(cert))
        _write_private(folder / MACHINE_KEY, _key_pem(key))
        machine = Machine(name, role, f"{cert.serial_number:x}", cert.not_valid_after_utc)
        self._record([*taken.values(), machine])
        return folder

    def revoke(self, name: str, now: datetime.datetime | None = None) -> Machine:
        """Revoke the certificate of machine ``name``: the router allows it nothing once restarted (its TLS
        handshake still succeeds: the list of machines, not the certificate, is what a router goes by). The name
        stays taken, so a new certificate under it cannot inherit anything.

        Raises:
            ConfigError: no machine of that name, or it is revoked already.
        """
        machines = self.machines()
        found = [m for m in machines if m.name == name]
        if not found:
            known = ", ".join(m.name for m in machines) or "none"
            raise ConfigError(f"no machine {name!r} in {self.directory / MACHINES} (machines: {known})")
        if found[0].revoked is not None:
            raise ConfigError(f"machine {name!r} was revoked already, on {found[0].revoked:%Y-%m-%d}")
        revoked = dataclasses.replace(found[0], revoked=_now(now))
        self._record([revoked if m.name == name else m for m in machines])
        return revoked

    def _record(self, machines: list[Machine]) -> None:
        """Write ``machines.toml``, here and in every router's folder (whose router reads it when it starts)."""
        text = _machines_toml(self.name, machines)
        _replace(self.directory / MACHINES, text)
        for machine in machines:
            if machine.role == "router" and (self.directory / machine.name).is_dir():
                _replace(self.directory / machine.name / MACHINES, text)


def _replace(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a crash never leaves half a registry)."""
    part = path.with_name(path.name + ".part")
    part.write_text(text, encoding="utf-8")
    part.replace(path)


def _alt_names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    from cryptography import x509

    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            if not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?", host):
                raise ConfigError(f"--host {host!r}: expected a host name or an IP address") from None
            names.append(x509.DNSName(host))
    return names


def _machines_toml(ca_name: str, machines: list[Machine]) -> str:
    lines = [
        f"# Machines enrolled by the certificate authority {ca_name!r} (`pluto certs add`). The router builds its",
        "# access control from this file when it starts: restart it after adding a machine.",
    ]
    for m in machines:
        lines += [
            "",
            f'[machines."{m.name}"]',
            f'role = "{m.role}"',
            f'serial = "{m.serial}"',
            f"expires = {m.expires.strftime('%Y-%m-%dT%H:%M:%SZ')}",
        ]
        if m.revoked is not None:
            lines.append(f"revoked = {m.revoked.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    return "\n".join(lines) + "\n"


def read_machines(path: Path) -> list[Machine]:
    """The machines listed in a ``machines.toml`` (none if the file does not exist).

    Raises:
        ConfigError: the file cannot be read or is not a list of machines.
    """
    if not path.exists():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: cannot read the list of machines: {err}") from None
    machines: list[Machine] = []
    table = data.get("machines", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [machines] must be a table")
    for name, entry in table.items():
        try:
            role, serial, expires = entry["role"], str(entry.get("serial", "")), entry["expires"]
            if role not in ROLES or not isinstance(expires, datetime.datetime):
                raise TypeError
        except (KeyError, TypeError):
            raise ConfigError(f"{path}: machine {name!r} needs a role ({', '.join(ROLES)}) and an expiry") from None
        revoked = entry.get("revoked")
        if revoked is not None and not isinstance(revoked, datetime.datetime):
            raise ConfigError(f"{path}: machine {name!r}: revoked must be a date and time")
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=datetime.UTC)
        if revoked is not None and revoked.tzinfo is None:
            revoked = revoked.replace(tzinfo=datetime.UTC)
        machines.append(Machine(check_machine_name(name), role, serial, expires, revoked))
    return machines


def init_ca(
    directory: Path, name: str = "pluto", days: int = CA_DAYS, now: datetime.datetime | None = None
) -> CertificateAuthority:
    """Make a certificate authority in ``directory`` (created if needed).

    Args:
        name: the CA's common name (e.g. the robot's or the fleet's name).
        days: how long its certificate is valid; every machine's certificate ends with it at the latest.

    Raises:
        ConfigError: a CA is there already (it is never overwritten: the machines enrolled by it would be locked
            out), or the folder cannot be written.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    if (directory / CA_KEY).exists() or (directory / CA_CERT).exists():
        raise ConfigError(
            f"{directory} already holds a certificate authority; it is kept (machines enrolled by it would be "
            "locked out): use --dir for another one"
        )
    if not 1 <= days <= 36500:
        raise ConfigError(f"--days {days}: expected 1 to 36500")
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as err:
        raise ConfigError(f"cannot make {directory}: {err.strerror or err}") from None
    key = _new_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    start = _now(now) - _SKEW
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + _SKEW + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_private(directory / CA_KEY, _key_pem(key))
    (directory / CA_CERT).write_bytes(_cert_pem(cert))
    return CertificateAuthority(directory)


def add_machine(
    directory: Path,
    name: str,
    role: str = "robot",
    hosts: Iterable[str] = (),
    days: int = MACHINE_DAYS,
    now: datetime.datetime | None = None,
) -> Path:
    """Issue a certificate to machine ``name`` from the CA in ``directory``; see :meth:`CertificateAuthority.issue`.

    Raises:
        ConfigError: no CA in ``directory``, or what :meth:`CertificateAuthority.issue` raises.
    """
    return CertificateAuthority(directory).issue(name, role, hosts, days, now)


def check_identity(ca: Path, cert: Path, key: Path, now: datetime.datetime | None = None) -> Identity:
    """Check a machine's TLS files before the bus uses them, so that a mistake is told in one line.

    Checked: the three files exist and parse; the certificate is valid now (neither expired nor not yet valid);
    the CA signed it; the key is the certificate's.

    Raises:
        ConfigError: the first of those that fails, naming the file and saying what to do.
    """
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec

    ca_cert = _load_cert(ca, "the CA certificate")
    mine = _load_cert(cert, "the certificate")
    private = _load_key(key, "the private key")
    name = _common_name(mine.subject) or "(no name)"
    moment = _now(now)
    for what, c in (("the CA certificate", ca_cert), (f"the certificate of {name!r}", mine)):
        path = ca if c is ca_cert else cert
        if moment > c.not_valid_after_utc:
            raise ConfigError(
                f"{what} {path} expired on {c.not_valid_after_utc:%Y-%m-%d %H:%M} UTC: issue a new one "
                "(`pluto certs add` on the CA's machine) and copy it here"
            )
        if moment < c.not_valid_before_utc:
            raise ConfigError(
                f"{what} {path} is not valid before {c.not_valid_before_utc:%Y-%m-%d %H:%M} UTC: "
                "is this machine's clock right?"
            )
    ca_key = ca_cert.public_key()
    if mine.issuer != ca_cert.subject or not isinstance(ca_key, ec.EllipticCurvePublicKey):
        raise ConfigError(f"the certificate {cert} was not issued by the CA in {ca} ({_common_name(ca_cert.subject)})")
    try:
        mine.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        raise ConfigError(f"the certificate {cert} was not signed by the CA in {ca}") from None
    if private.public_key() != mine.public_key():
        raise ConfigError(f"the private key {key} is not the key of the certificate {cert}")
    return Identity(name, _role_of(mine), mine.not_valid_after_utc, _common_name(ca_cert.subject), _hosts(mine))


def _hosts(cert: x509.Certificate) -> tuple[str, ...]:
    from cryptography import x509

    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    return tuple(str(value) for value in names.get_values_for_type(x509.DNSName)) + tuple(
        str(value) for value in names.get_values_for_type(x509.IPAddress)
    )

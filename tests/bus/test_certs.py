"""The robot's certificate authority: ``pluto certs init`` and ``add``, the files they write, and the checks a machine
makes of its TLS files before it joins a secure bus (each mistake one clear line)."""

from __future__ import annotations

import datetime
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pluto.bus import certs
from pluto.errors import ConfigError


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def ca_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "ca"
    certs.init_ca(directory, name="atrv")
    return directory


def test_init_makes_a_ca_whose_key_only_its_owner_reads(ca_dir: Path) -> None:
    assert _mode(ca_dir / certs.CA_KEY) == 0o600
    cert = x509.load_pem_x509_certificate((ca_dir / certs.CA_CERT).read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "atrv"
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_init_never_overwrites_a_ca(ca_dir: Path) -> None:
    before = (ca_dir / certs.CA_KEY).read_bytes()
    with pytest.raises(ConfigError, match="already holds a certificate authority"):
        certs.init_ca(ca_dir)
    assert (ca_dir / certs.CA_KEY).read_bytes() == before


def test_add_issues_a_folder_to_copy_with_the_name_and_role(ca_dir: Path) -> None:
    folder = certs.add_machine(ca_dir, "laptop", "viewer")
    assert folder == ca_dir / "laptop"
    assert sorted(p.name for p in folder.iterdir()) == ["ca.pem", "cert.pem", "key.pem"]
    assert _mode(folder / "key.pem") == 0o600
    assert (folder / "ca.pem").read_bytes() == (ca_dir / certs.CA_CERT).read_bytes()
    cert = x509.load_pem_x509_certificate((folder / "cert.pem").read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "laptop"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value == "viewer"
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    identity = certs.check_identity(folder / "ca.pem", folder / "cert.pem", folder / "key.pem")
    assert (identity.name, identity.role, identity.ca_name) == ("laptop", "viewer", "atrv")
    assert [(m.name, m.role) for m in certs.read_machines(ca_dir / certs.MACHINES)] == [("laptop", "viewer")]


def test_a_router_certificate_names_its_addresses_and_keeps_the_list_of_machines(ca_dir: Path) -> None:
    router = certs.add_machine(ca_dir, "hub", "router", hosts=["192.168.1.10", "hub.lan"])
    identity = certs.check_identity(router / "ca.pem", router / "cert.pem", router / "key.pem")
    assert {"hub", "hub.lan", "192.168.1.10", "127.0.0.1", "localhost"} <= set(identity.hosts)
    cert = x509.load_pem_x509_certificate((router / "cert.pem").read_bytes())
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH
    ]
    # A machine added later is on the router's copy of the list too (it reads it when it starts).
    certs.add_machine(ca_dir, "robot1", "robot")
    assert [(m.name, m.role) for m in certs.read_machines(router / certs.MACHINES)] == [
        ("hub", "router"),
        ("robot1", "robot"),
    ]


@pytest.mark.parametrize(
    ("name", "role", "hosts", "message"),
    [
        ("taken", "robot", [], "already has a certificate"),
        ("bad name", "robot", [], "machine name 'bad name'"),
        ("../up", "robot", [], "machine name"),
        ("ok", "admin", [], "role 'admin': expected one of robot, viewer, router"),
        ("ok", "robot", ["10.0.0.1"], "only a router's certificate"),
        ("ok", "router", ["bad host!"], "--host 'bad host!'"),
    ],
)
def test_add_refuses_bad_input_in_one_line(ca_dir: Path, name: str, role: str, hosts: list[str], message: str) -> None:
    certs.add_machine(ca_dir, "taken", "robot")
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")) as info:
        certs.add_machine(ca_dir, name, role, hosts)
    assert "\n" not in str(info.value)
    assert [m.name for m in certs.read_machines(ca_dir / certs.MACHINES)] == ["taken"]


def test_a_revoked_machine_stays_listed_and_its_name_taken(ca_dir: Path) -> None:
    router = certs.add_machine(ca_dir, "hub", "router")
    certs.add_machine(ca_dir, "robot1", "robot")
    authority = certs.CertificateAuthority(ca_dir)
    when = datetime.datetime(2030, 5, 1, 12, 0, tzinfo=datetime.UTC)
    assert authority.revoke("robot1", now=when).revoked == when
    for listing in (ca_dir / certs.MACHINES, router / certs.MACHINES):
        assert [(m.name, m.revoked) for m in certs.read_machines(listing)] == [("hub", None), ("robot1", when)]
    with pytest.raises(ConfigError, match="revoked already, on 2030-05-01"):
        authority.revoke("robot1")
    with pytest.raises(ConfigError, match="already has a certificate"):
        authority.issue("robot1", "robot")
    with pytest.raises(ConfigError, match=r"no machine 'nobody' .*\(machines: hub, robot1\)"):
        authority.revoke("nobody")


def test_add_without_a_ca_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no certificate authority in .*: make one with `pluto certs init`"):
        certs.add_machine(tmp_path / "nowhere", "robot1")


# -- the checks a machine makes before it joins ------------------------------------------------------------------


def _files(folder: Path) -> tuple[Path, Path, Path]:
    return folder / "ca.pem", folder / "cert.pem", folder / "key.pem"


def test_an_expired_certificate_is_told_with_its_date(ca_dir: Path) -> None:
    long_ago = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    folder = certs.add_machine(ca_dir, "old", "robot", days=30, now=long_ago)
    with pytest.raises(ConfigError, match=r"certificate of 'old' .* expired on 2020-01-31"):
        certs.check_identity(*_files(folder))


def test_a_certificate_not_yet_valid_points_at_the_clock(ca_dir: Path) -> None:
    folder = certs.add_machine(ca_dir, "robot1", "robot")
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
    with pytest.raises(ConfigError, match="is this machine's clock right"):
        certs.check_identity(*_files(folder), now=past)


def test_a_certificate_of_another_ca_is_refused(ca_dir: Path, tmp_path: Path) -> None:
    # Another CA of the same name: only the signature tells them apart.
    stranger = certs.add_machine(certs.init_ca(tmp_path / "other", name="atrv").directory, "robot1", "robot")
    ours = certs.add_machine(ca_dir, "robot1", "robot")
    with pytest.raises(ConfigError, match="was not signed by the CA in"):
        certs.check_identity(ours / "ca.pem", stranger / "cert.pem", stranger / "key.pem")


def test_a_key_of_another_certificate_is_refused(ca_dir: Path) -> None:
    one, two = certs.add_machine(ca_dir, "one"), certs.add_machine(ca_dir, "two")
    with pytest.raises(ConfigError, match="is not the key of the certificate"):
        certs.check_identity(one / "ca.pem", one / "cert.pem", two / "key.pem")


def test_missing_and_damaged_files_are_named(ca_dir: Path) -> None:
    folder = certs.add_machine(ca_dir, "robot1")
    with pytest.raises(ConfigError, match=r"the certificate .*nope\.pem does not exist"):
        certs.check_identity(folder / "ca.pem", folder / "nope.pem", folder / "key.pem")
    (folder / "cert.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match=r"the certificate .*cert\.pem is not a PEM certificate"):
        certs.check_identity(*_files(folder))
    with pytest.raises(ConfigError, match="is a folder, not a file"):
        certs.check_identity(folder, folder / "cert.pem", folder / "key.pem")


def test_a_damaged_list_of_machines_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / certs.MACHINES
    path.write_text('[machines.robot1]\nrole = "admin"\n')
    with pytest.raises(ConfigError, match="machine 'robot1' needs a role"):
        certs.read_machines(path)
    path.write_text("[machines\n")
    with pytest.raises(ConfigError, match="cannot read the list of machines"):
        certs.read_machines(path)


# -- the command line -------------------------------------------------------------------------------------------


def _pluto(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pluto", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_pluto_certs_init_add_list(tmp_path: Path) -> None:
    ca = str(tmp_path / "ca")
    done = _pluto("certs", "init", "--dir", ca, "--name", "atrv")
    assert done.returncode == 0, done.stderr
    assert "certificate authority 'atrv' made in" in done.stdout
    done = _pluto("certs", "add", "router", "--role", "router", "--host", "10.0.0.1", "--dir", ca)
    assert done.returncode == 0, done.stderr
    assert "pluto router --secure --tls" in done.stdout and "tls/10.0.0.1:7447" in done.stdout
    assert _pluto("certs", "add", "laptop", "--role", "viewer", "--dir", ca).returncode == 0
    listing = _pluto("certs", "list", "--dir", ca)
    assert listing.returncode == 0, listing.stderr
    rows = [line.split()[:2] for line in listing.stdout.splitlines()[2:]]
    assert rows == [["router", "router"], ["laptop", "viewer"]]
    revoked = _pluto("certs", "revoke", "laptop", "--dir", ca)
    assert revoked.returncode == 0 and "restart the router" in revoked.stdout, revoked.stderr
    assert "(revoked " in _pluto("certs", "list", "--dir", ca).stdout
    again = _pluto("certs", "add", "laptop", "--dir", ca)
    assert again.returncode == 1
    assert again.stderr.strip().count("\n") == 0 and "already has a certificate" in again.stderr
    missing = _pluto("certs", "add", "robot1", "--dir", str(tmp_path / "none"))
    assert missing.returncode == 1 and "pluto certs init" in missing.stderr
    assert "Traceback" not in again.stderr + missing.stderr

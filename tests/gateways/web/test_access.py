"""Which ``Host`` the web view answers: the names of this computer, never a name a hostile site points at it."""

from __future__ import annotations

import pytest

from pluto.gateways.web.access import HostPolicy, allowed_name, host_name


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost", "localhost"),
        ("LocalHost.:8080", "localhost"),
        ("127.0.0.1:8080", "127.0.0.1"),
        ("[::1]:8080", "::1"),
        ("[0:0::1]", "::1"),
        ("[::ffff:127.0.0.1]:80", "127.0.0.1"),
        ("evil.example:8080", "evil.example"),
        ("127.0.0.1:", "127.0.0.1"),
        ("", None),
        ("a:b:c", None),
        ("[::1", None),
        ("[evil.example]:80", None),
        ("evil example", None),
        ("localhost:8080x", None),
        ("localhost:12345678", None),
    ],
)
def test_the_name_of_a_host_header_is_read_without_its_port(header: str, name: str | None) -> None:
    assert host_name(header) == name


def test_on_loopback_the_loopback_names_are_answered_and_a_rebinding_name_is_not() -> None:
    policy = HostPolicy("127.0.0.1")
    for header in ("localhost", "localhost:8080", "127.0.0.1", "127.0.0.1:8080", "[::1]", "[::1]:8080", "127.0.0.2"):
        assert policy.allows(header, "127.0.0.1"), header
    for header in ("evil.example:8080", "evil.example", "localhost.evil.example", "127.0.0.1.nip.io:8080", "x"):
        assert not policy.allows(header, "127.0.0.1"), header
    assert not policy.allows(None, "127.0.0.1")  # no Host at all: no browser sends that
    assert not policy.allows("192.168.1.5:8080", "127.0.0.1")  # an address this server is not reached at


def test_bound_to_every_address_the_address_a_connection_arrived_at_and_the_allowed_names_are_answered() -> None:
    policy = HostPolicy("0.0.0.0", ["Robot.Local", "[fe80::1]", "10.0.0.2"])
    assert policy.allows("0.0.0.0:8080")  # the address pluto web prints
    assert policy.allows("192.168.1.5:8080", "192.168.1.5")
    assert policy.allows("192.168.1.5:8080", "::ffff:192.168.1.5")  # a dual-stack socket's view of it
    assert policy.allows("robot.local:8080") and policy.allows("ROBOT.LOCAL.") and policy.allows("[fe80::1]:80")
    assert policy.allows("10.0.0.2")
    assert not policy.allows("192.168.1.6:8080", "192.168.1.5")
    assert not policy.allows("evil.example:8080", "192.168.1.5")
    assert HostPolicy("robot.lan").allows("robot.lan:8080")  # bound by name


@pytest.mark.parametrize("value", ["http://robot.local", "robot.local:8080", "*", "", "robot local", "a/b"])
def test_an_allowed_host_must_be_a_bare_name_or_address(value: str) -> None:
    with pytest.raises(ValueError, match="without a scheme or a port"):
        allowed_name(value)
    with pytest.raises(ValueError, match="not a host name"):
        HostPolicy("127.0.0.1", [value])


def test_allowed_names_are_written_as_requests_give_them() -> None:
    assert allowed_name("Robot.Local.") == "robot.local"
    assert allowed_name("[::1]") == "::1" and allowed_name("0:0::1") == "::1"
    assert allowed_name(" 192.168.1.5 ") == "192.168.1.5"

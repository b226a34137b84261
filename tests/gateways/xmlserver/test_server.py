"""The server on a bus, with plain socket clients: list, read, subscribe, write, call, the token and the limits.

The interfaces are written by the test (a Publisher thread); the whole simulated robot is in test_scenario.py.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.errors import ConfigError
from pluto.gateways.xmlserver.module import XmlServerModule, XmlServerParams
from pluto.gateways.xmlserver.server import ServerSettings
from tests.gateways.clock import ManualClock
from tests.gateways.xmlserver.client import XmlClient, error_code
from tests.gateways.xmlserver.conftest import Publisher, odometry
from tests.helpers import wait_until


def test_list_and_read(bus: Bus, start_server: Callable[..., XmlServerModule]) -> None:
    server = start_server()
    with Publisher(bus, "Base/Drive/State", 50.0, odometry), XmlClient(server.server.address) as client:
        hello = client.start()
        assert hello.get("robot") == bus.robot and hello.get("auth") == "none"
        listing = client.request('<list id="l"/>')
        assert listing.tag == "listing" and listing.get("id") == "l"
        assert "xmlserver" in [m.get("name") for m in listing.iter("module")]
        interfaces = {i.get("name"): i for i in listing.iter("interface")}
        state = interfaces["Base/Drive/State"]
        assert (state.get("type"), state.get("live"), state.get("writable")) == ("Odometry", "true", "false")
        command = interfaces["drive/command"]
        assert (command.get("type"), command.get("live"), command.get("writable")) == ("ActuatorState", "false", "true")

        value = client.request('<read id="r" name="Base/Drive/State"/>')
        assert value.tag == "value" and value.get("id") == "r" and value.get("name") == "Base/Drive/State"
        (odo,) = list(value)
        assert odo.tag == "Odometry" and float(odo.get("x", "nan")) > 0.0
        assert abs(float(odo.get("stamp", "0")) - time.time()) < 60.0
        later = client.request('<read name="Base/Drive/State"/>')
        assert float(later[0].get("x", "nan")) >= float(odo.get("x", "nan"))  # the latest value, not the first

        assert error_code(client.request('<read id="u" name="No/Such"/>')) == "unknown-interface"
        assert error_code(client.request('<read name="custom/thing" type="Odometry"/>')) == "no-value"
        assert error_code(client.request('<read name="Base/Drive/State" type="Contact"/>')) == "bad-request"


def test_subscribe_at_a_rate_and_unsubscribe(bus: Bus, start_server: Callable[..., XmlServerModule]) -> None:
    server = start_server()
    with Publisher(bus, "Base/Drive/State", 100.0, odometry), XmlClient(server.server.address) as client:
        client.start()
        reply = client.request('<subscribe id="s" name="Base/Drive/State" rate="10"/>')
        assert (reply.tag, reply.get("id"), reply.get("rate")) == ("subscribed", "s", "10.0")
        updates = client.wait_updates(31, "Base/Drive/State")
        # the rate on the values' own stamps (written by the publisher): 30 periods
        stamps = [float(u[0].get("stamp", "nan")) for u in updates[1:]]  # the first is the current value
        rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
        assert rate == pytest.approx(10.0, rel=0.1)
        seqs = [int(u.get("seq", "0")) for u in updates]
        assert seqs == sorted(seqs) and seqs[-1] - seqs[1] > 2 * len(seqs)  # values in between were skipped

        # subscribing again changes the rate
        client.request('<subscribe name="Base/Drive/State" rate="25"/>')
        client.updates.clear()
        faster = client.wait_updates(41, "Base/Drive/State")
        stamps = [float(u[0].get("stamp", "nan")) for u in faster[1:]]
        assert (len(stamps) - 1) / (stamps[-1] - stamps[0]) == pytest.approx(25.0, rel=0.1)

        assert client.request('<unsubscribe id="u" name="Base/Drive/State"/>').tag == "unsubscribed"
        client.updates.clear()
        assert client.request('<read name="Base/Drive/State"/>').tag == "value"  # a round trip later ...
        assert client.updates == []  # ... no update came after the unsubscribed reply
        assert error_code(client.request('<unsubscribe name="Base/Drive/State"/>')) == "not-subscribed"
        assert error_code(client.request('<subscribe name="Nope" rate="1"/>')) == "unknown-interface"
    wait_until(lambda: server.server.stats().topics == [], message="the bus subscription is released")


def test_write_commands_and_bad_values(bus: Bus, start_server: Callable[..., XmlServerModule]) -> None:
    server = start_server()
    commands = bus.create_reader("drive/command", msgs.ActuatorState)
    with XmlClient(server.server.address) as client:
        client.start()
        before = time.time()
        reply = client.request(
            '<write id="w" name="drive/command"><ActuatorState cmd_flags="0"><velocity>0.3 0</velocity>'
            "</ActuatorState></write>"
        )
        assert (reply.tag, reply.get("id"), reply.get("name")) == ("written", "w", "drive/command")
        command = commands.wait_for_update(timeout=5)
        assert command.velocity == [0.3, 0.0] and command.cmd_flags == 0
        assert command.stamp >= before  # a stamp left at 0 is set to the server's clock

        bad = [
            ("<ActuatorState><velocity>fast 0</velocity></ActuatorState>", "bad-value"),
            ("<ActuatorState><velocity>NaN 0</velocity></ActuatorState>", "bad-value"),
            ('<ActuatorState cmd_flags="ten"/>', "bad-value"),
            ('<ActuatorState speed="1"/>', "bad-value"),
            ('<Odometry x="1"/>', "bad-value"),  # the wrong message type for the interface
        ]
        for body, code in bad:
            assert error_code(client.request(f'<write name="drive/command">{body}</write>')) == code, body
        assert error_code(client.request('<write name="Base/Drive/State"><Odometry/></write>')) == "not-writable"
        assert error_code(client.request('<write name="No/Such"><Odometry/></write>')) == "unknown-interface"
        assert commands.received == 1  # nothing bad reached the bus


def test_calls(bus: Bus, start_server: Callable[..., XmlServerModule]) -> None:
    server = start_server()

    def echo(request: Any) -> Any:
        if request == "fail":
            raise ValueError("asked to fail")
        return {"got": request, "sum": sum(request["numbers"]) if isinstance(request, dict) else None}

    bus.create_service("test/echo", echo)
    with XmlClient(server.server.address) as client:
        client.start()
        reply = client.request(
            '<call id="c" service="test/echo"><map><item key="numbers"><array><int>2</int><float>0.5</float></array>'
            "</item></map></call>"
        )
        assert (reply.tag, reply.get("id"), reply.get("service")) == ("reply", "c", "test/echo")
        (result,) = list(reply)
        items = {item.get("key"): item[0] for item in result}
        assert items["sum"].tag == "float" and float(items["sum"].text or "") == 2.5
        assert [e.text for e in items["got"].iter("int")] == ["2"]

        info = client.request('<call service="mom/xmlserver"/>')
        assert info[0].tag == "ModuleInfo" and info[0].get("name") == "xmlserver"
        assert error_code(client.request('<call service="test/echo"><str>fail</str></call>')) == "remote-error"
        assert error_code(client.request('<call service="test/nobody" timeout="0.3"/>')) == "timeout"


def test_the_token_guards_every_request(bus: Bus, start_server: Callable[..., XmlServerModule], tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    token_file.chmod(0o600)
    server = start_server(token_file=str(token_file), auth_backoff=30.0, auth_backoff_max=60.0)
    commands = bus.create_reader("drive/command", msgs.ActuatorState)
    write = '<write name="drive/command"><ActuatorState><velocity>0.2 0</velocity></ActuatorState></write>'
    with XmlClient(server.server.address) as client:
        assert client.start().get("auth") == "token"
        assert error_code(client.request(write)) == "unauthorized"
        assert error_code(client.request('<call service="mom/xmlserver"/>')) == "unauthorized"
        assert error_code(client.request("<list/>")) == "unauthorized"  # nothing at all before the token
        assert client.request('<auth id="a" token="s3cret-token"/>').tag == "authorized"
        assert client.request(write).tag == "written"
        assert client.request("<list/>").tag == "listing"
        assert commands.wait_for_update(timeout=5).velocity == [0.2, 0.0]
        assert commands.received == 1  # the refused write never reached the bus
    with XmlClient(server.server.address) as guesser:
        guesser.start()
        codes = [error_code(guesser.request('<auth token="guess"/>')) for _ in range(3)]
        assert codes == ["unauthorized", "rate-limited", "rate-limited"]  # checked once, then the back-off
        assert guesser.closed_by_server()  # three failed attempts end the connection


def test_a_missing_token_file_or_a_busy_port_is_a_clear_error(
    bus: Bus, start_server: Callable[..., XmlServerModule], tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="token file"):
        XmlServerModule(bus, XmlServerParams(port=0, token_file=str(tmp_path / "none"))).start()
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="empty"):
        XmlServerModule(bus, XmlServerParams(port=0, token_file=str(tmp_path / "empty"))).start()
    first = start_server()
    port = first.server.address[1]
    with pytest.raises(ConfigError, match="cannot listen"):
        XmlServerModule(bus, XmlServerParams(port=port), name="xmlserver2").start()
    with pytest.raises(ValueError):
        XmlServerParams(max_subscriptions=0)
    with pytest.raises(ValueError):
        XmlServerParams(writable=["a*b"])


def test_the_module_has_a_parameter_for_each_server_setting_with_its_default_and_meaning(bus: Bus) -> None:
    settings = {f.name: f for f in msgspec.structs.fields(ServerSettings)}
    params = {f.name: f for f in msgspec.structs.fields(XmlServerParams)}
    assert set(settings) - set(params) == {"token"}  # the secret never is a parameter
    defaults = ServerSettings()
    for name in set(settings) - {"token", "writable"}:
        assert params[name].type == settings[name].type and params[name].default == getattr(defaults, name), name
    assert XmlServerParams().settings(None) == defaults  # writable: the same interfaces, as a sorted list
    assert XmlServerParams().writable == sorted(defaults.writable)
    module = XmlServerModule(bus, XmlServerParams(port=0, max_call_timeout=3.0, max_clients=7))
    described = {p.name: p for p in module.describe_parameters()}
    assert described["max_clients"].value == 7 and described["max_clients"].default == 100
    assert described["max_clients_per_address"].description.startswith("connections served at once from one")
    assert described["port"].description.startswith("TCP port") and "secret" not in described["port"].description
    assert described["writable"].description.startswith("interfaces clients may write")
    assert all(p.description for p in described.values()), [p.name for p in described.values() if not p.description]
    given = module.params.settings("s3cret")
    assert (given.max_call_timeout, given.max_clients, given.token) == (3.0, 7, "s3cret")
    with pytest.raises(msgspec.ValidationError, match="max_clients"):
        msgspec.convert({"max_clients": "many"}, XmlServerParams)


def test_limits_per_connection(bus: Bus, start_server: Callable[..., XmlServerModule]) -> None:
    server = start_server(max_subscriptions=2, max_rate_hz=50.0, request_rate=5.0, request_burst=10)
    with Publisher(bus, "Base/Drive/State", 20.0, odometry), XmlClient(server.server.address) as client:
        client.start()
        assert client.request('<subscribe name="Base/Drive/State" rate="1"/>').tag == "subscribed"
        assert client.request('<subscribe name="Base/Sonar" rate="1"/>').tag == "subscribed"
        assert error_code(client.request('<subscribe name="Base/Power" rate="1"/>')) == "too-many-subscriptions"
        assert error_code(client.request('<subscribe name="Base/Drive/State" rate="51"/>')) == "bad-request"
        # 5 requests so far; a burst of 20 more: the bucket (10) runs dry
        client.send("<list/>\n" * 20)
        codes = [client.reply() for _ in range(20)]
        refused = [c for c in codes if c.tag == "error"]
        assert refused and all(error_code(c) == "rate-limited" for c in refused)
        assert len(refused) <= 20 - 4  # the rest of the burst was served
    wait_until(lambda: server.server.stats().clients == [], message="the connection is closed")


def test_too_many_clients_and_too_many_bad_documents(
    bus: Bus, start_server: Callable[..., XmlServerModule], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pluto.xmlserver")
    server = start_server(max_clients=2, max_bad_documents=5)
    address = server.server.address
    with XmlClient(address) as first, XmlClient(address) as second:
        for client in (first, second):  # subscribed: neither makes room for a newcomer
            client.start()
            assert client.request('<subscribe name="Base/Drive/State" rate="1"/>').tag == "subscribed"
        with XmlClient(address) as third:
            refusal = third.document()
            assert error_code(refusal) == "too-many-clients"
            assert "at most 2 clients, and every one is authenticated and subscribed" in refusal.get("reason", "")
            assert third.closed_by_server()
        for i in range(4):
            assert error_code(first.request(f"<oops{i}/>")) == "unknown-operation"
        first.send("garbage\n")
        assert error_code(first.reply()) == "malformed"
        assert error_code(first.reply()) == "too-many-errors"
        assert first.closed_by_server()
        assert second.request("<list/>").tag == "listing"  # the other client is served on
    wait_until(lambda: server.server.stats().clients == [], message="the connections are closed")
    messages = [r.getMessage() for r in caplog.records if r.name == "pluto.xmlserver"]
    assert sum("connected" in m and "disconnected" not in m for m in messages) == 2
    assert sum("disconnected" in m for m in messages) == 2
    assert any("refused" in m and "connections already" in m for m in messages)
    assert any("closing after 5 bad documents" in m for m in messages)


def test_the_launcher_starts_it_as_a_module(bus: Bus) -> None:
    from pluto.gateways.xmlserver.server import ServerStats
    from pluto.runtime import launcher

    launcher.start_daemon(bus, "xmlserver", params={"port": 0}, timeout=30)
    try:
        stats = bus.call("xmlserver/clients", None, ServerStats, timeout=5)
        host, port = stats.address.rsplit(":", 1)
        assert host == "127.0.0.1" and stats.clients == []
        with XmlClient((host, int(port))) as client:
            client.start()
            assert "xmlserver" in [m.get("name") for m in client.request("<list/>").iter("module")]
            (seen,) = bus.call("xmlserver/clients", None, ServerStats, timeout=5).clients
            assert seen.peer.endswith(f":{client.sock.getsockname()[1]}") and seen.requests == 1
    finally:
        launcher.stop_daemon(bus.robot, "xmlserver", timeout=10)


def test_a_clock_jump_restarts_the_pacing_of_every_subscription(bus: Bus) -> None:
    clock = ManualClock(100.0)
    module = XmlServerModule(bus, XmlServerParams(port=0), clock=clock)
    module.start()
    try:
        with Publisher(bus, "Base/Drive/State", 50.0, odometry), XmlClient(module.server.address, 0.5) as client:
            client.start()
            assert client.request('<subscribe name="Base/Drive/State" rate="1"/>').tag == "subscribed"
            client.wait_updates(1, "Base/Drive/State", timeout=5)  # the current value; the next is due at 101 s
            with pytest.raises(TimeoutError):
                client.wait_updates(2, "Base/Drive/State", timeout=5)  # the clock stands at 100 s
            # Back to 99.5 s (a new run): the next value goes out at once, not when the clock is at 101 s again.
            clock.jump(99.5)
            client.wait_updates(2, "Base/Drive/State", timeout=5)
            with pytest.raises(TimeoutError):
                client.wait_updates(3, "Base/Drive/State", timeout=5)  # and then at 1 Hz of the new run
    finally:
        module.stop()


def test_the_secret_comes_from_a_file_or_the_environment_never_the_command_line(
    bus: Bus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def check(params: dict[str, Any], right: str | None, wrong: str) -> None:
        module = XmlServerModule(bus, XmlServerParams(port=0, **params), name="xmlserver-secret")
        module.start()
        try:
            with XmlClient(module.server.address) as client:
                hello = client.start()
                if right is None:
                    assert hello.get("auth") == "none"
                    return
                assert hello.get("auth") == "token"
                assert error_code(client.request(f'<auth token="{wrong}"/>')) == "unauthorized"
            with XmlClient(module.server.address, source="127.0.0.2") as client:  # not in the wrong one's back-off
                client.start()
                assert client.request(f'<auth token="{right}"/>').tag == "authorized"
        finally:
            module.stop()

    monkeypatch.setenv("PLUTO_XML_TOKEN", "  from the environment\n")
    check({}, "from the environment", "guess")
    token_file = tmp_path / "token"
    token_file.write_text("from the file\n")
    token_file.chmod(0o600)
    check({"token_file": str(token_file)}, "from the file", "from the environment")  # the file wins
    monkeypatch.setenv("PLUTO_XML_TOKEN", "")
    check({}, None, "")
    monkeypatch.setenv("PLUTO_XML_TOKEN", "two\nlines")
    with pytest.raises(ConfigError, match="PLUTO_XML_TOKEN"):
        XmlServerModule(bus, XmlServerParams(port=0), name="xmlserver-secret").start()

    # no option and no parameter takes the secret itself
    from pluto.cli.main import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    xmlserver = commands.choices["xmlserver"]
    options = [o for action in xmlserver._actions for o in action.option_strings]
    assert [o for o in options if "token" in o or "secret" in o] == ["--token-file"]
    for argv in (["xmlserver", "--token", "s3cret"], ["xmlserver", "--token=s3cret"]):
        with pytest.raises(SystemExit):  # not taken for --token-file
            parser.parse_args(argv)
    with pytest.raises(msgspec.ValidationError, match="token"):
        msgspec.convert({"token": "s3cret"}, XmlServerParams)  # what `-p token=s3cret` would give

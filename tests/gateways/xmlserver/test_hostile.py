"""Hostile input: each attack gets an ``<error>``, and the attacker's next request, the server and a client
subscribed meanwhile all carry on."""

from __future__ import annotations

import logging
import socket
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import Element

import numpy as np
import pytest

from pluto import msgs
from pluto.bus import Bus
from pluto.gateways.xmlserver.module import XmlServerModule
from pluto.gateways.xmlserver.server import ServerSettings, XmlServer
from tests.gateways.xmlserver.client import XmlClient, error_code
from tests.gateways.xmlserver.conftest import Publisher, odometry
from tests.gateways.xmlserver.test_codec import BILLION_LAUGHS
from tests.helpers import wait_until

WRITE = '<write name="drive/command"><ActuatorState><velocity>1.0 0</velocity></ActuatorState></write>'


def errors_until(client: XmlClient, request_id: str) -> list[Element]:
    """The errors received before the reply with id ``request_id`` (which must be a value)."""
    errors: list[Element] = []
    while True:
        doc = client.reply()
        if doc.get("id") == request_id:
            assert doc.tag == "value", doc.attrib
            return errors
        error_code(doc)
        errors.append(doc)


def test_attacks_are_refused_and_harm_no_one(
    bus: Bus, start_server: Callable[..., XmlServerModule], tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("secret")
    token.chmod(0o600)
    server = start_server(token_file=str(token), max_bad_documents=10_000, request_burst=1000)
    address = server.server.address
    commands = bus.create_reader("drive/command")
    rng = np.random.default_rng(7)
    garbage = rng.integers(0, 256, 4000, dtype=np.uint8).tobytes()
    attacks: list[tuple[str, bytes, set[str]]] = [
        ("billion laughs", BILLION_LAUGHS + b"\n", {"forbidden"}),
        (
            "billion laughs, one declaration a line",
            BILLION_LAUGHS.replace(b">", b">\n") + b"\n",
            {"forbidden", "malformed"},
        ),
        (
            "external entity",
            b'<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><read name="&x;"/>\n',
            {"forbidden"},
        ),
        ("external DTD", b'<!DOCTYPE r SYSTEM "http://127.0.0.1:9/x.dtd"><list/>\n', {"forbidden"}),
        ("deep nesting", b"<a>" * 20_000 + b"</a>" * 20_000 + b"\n", {"too-deep"}),
        ("10 MB document", b"<read name='" + b"x" * 10_000_000 + b"'/>\n", {"too-large"}),
        ("binary garbage", garbage.replace(b"\n", b"") + b"\n", {"malformed"}),
        ("binary garbage with newlines", garbage + b"\n", {"malformed"}),
    ]
    with (
        Publisher(bus, "Base/Drive/State", 50.0, odometry),
        XmlClient(address) as victim,
        XmlClient(address) as attacker,
    ):
        victim.start()
        attacker.start()
        assert error_code(attacker.request(WRITE)) == "unauthorized"  # a write without the token
        for client in (victim, attacker):
            assert client.request('<auth token="secret"/>').tag == "authorized"
        assert victim.request('<subscribe name="Base/Drive/State" rate="20"/>').tag == "subscribed"
        seen = int(victim.wait_updates(1)[-1].get("seq", "0"))
        for i, (what, data, expected) in enumerate(attacks):
            attacker.send(data)
            attacker.send(f'<read id="after{i}" name="Base/Drive/State"/>')
            errors = errors_until(attacker, f"after{i}")
            codes = [error_code(e) for e in errors]
            assert codes and set(codes) <= expected, (what, codes)
            assert not any("root:" in e.get("reason", "") for e in errors)  # nothing of /etc/passwd leaks
            # the victim's updates keep coming
            seq = int(victim.wait_updates(len(victim.updates) + 1)[-1].get("seq", "0"))
            assert seq > seen, what
            seen = seq
        assert commands.read() is None  # the refused write never reached the bus

        stats = {c.peer.rsplit(":", 1)[1]: c for c in server.server.stats().clients}
        hostile = stats[str(attacker.sock.getsockname()[1])]
        assert hostile.bad_documents >= len(attacks)
        assert hostile.queued_bytes < 64 * 1024
        assert stats[str(victim.sock.getsockname()[1])].bad_documents == 0

    # a document cut short by the end of the stream
    with XmlClient(address) as truncated:
        truncated.start()
        truncated.send(b'<read name="Base/Drive/State"')
        truncated.sock.shutdown(socket.SHUT_WR)
        assert error_code(truncated.document()) == "truncated"
        assert truncated.closed_by_server()

    # and the server still serves a newcomer
    with XmlClient(address) as newcomer:
        newcomer.start()
        assert newcomer.request('<auth token="secret"/>').tag == "authorized"
        assert newcomer.request(WRITE).tag == "written"


# -- values out of range ----------------------------------------------------------------------------------------------


def test_values_out_of_range_are_refused_with_the_field_and_counted(
    bus: Bus, start_server: Callable[..., XmlServerModule]
) -> None:
    server = start_server()
    commands = bus.create_reader("drive/command", msgs.ActuatorState)
    calls: list[Any] = []

    def echo(request: Any) -> str:
        calls.append(request)
        return "ok"

    bus.create_service("test/echo", echo)
    write = '<write id="{i}" name="{name}">{body}</write>'
    velocity = "drive/command velocity"
    refused = [
        ("drive/command", "<velocity>1e308 0</velocity>", f"{velocity}[0] = 1e+308 m/s is out of range"),
        ("drive/command", "<velocity>0.3 -1e308</velocity>", f"{velocity}[1] = -1e+308 rad/s"),
        ("drive/command", "<velocity>3.5 0</velocity>", f"{velocity}[0] = 3.5 m/s is out of range [-3, 3] m/s"),
        ("drive/command", "<velocity>0.1 0 0 0</velocity>", f"{velocity} has 4 values; at most 2"),
        # refused while it is read: at most 32 numbers in any vector of an ActuatorState, never 60,000 parsed
        ("drive/command", f"<velocity>{'0 ' * 60_000}</velocity>", "<ActuatorState/velocity>: more than 32 numbers"),
        ("Wrist/Command", "<position>10 0</position>", "Wrist/Command position[0] = 10 rad is out of range"),
    ]
    attributes = [
        ('stamp="1e300"', "drive/command stamp = 1e+300 is out of range"),
        ('cmd_flags="4611686018427387904"', "drive/command cmd_flags = 4.61169e+18 is out of range"),
    ]
    cases = [(name, f"<ActuatorState>{vector}</ActuatorState>", what) for name, vector, what in refused]
    cases += [("drive/command", f"<ActuatorState {attribute}/>", what) for attribute, what in attributes]
    with XmlClient(server.server.address) as client:
        client.start()
        for i, (name, body, what) in enumerate(cases):
            reply = client.request(write.format(i=i, name=name, body=body))
            assert (error_code(reply), reply.get("id")) == ("bad-value", str(i)), (what, reply.attrib)
            assert what in reply.get("reason", ""), reply.attrib
            # the session goes on: a good command is written
            good = "<ActuatorState><velocity>0.2 0</velocity></ActuatorState>"
            assert client.request(write.format(i="ok", name="drive/command", body=good)).tag == "written"
        wait_until(lambda: commands.received >= len(cases), message="the good commands arrive")
        assert commands.received == len(cases)  # only the good ones reached the bus
        for request, where in (
            ("<array><float>1e308</float></array>", "test/echo request[0]"),
            ('<map><item key="kp"><float>-1e300</float></item></map>', "test/echo request[kp]"),
            ("<ActuatorState><velocity>1e12 0</velocity></ActuatorState>", "test/echo velocity[0]"),
        ):
            reply = client.request(f'<call service="test/echo">{request}</call>')
            assert error_code(reply) == "bad-value" and where in reply.get("reason", ""), reply.attrib
        assert client.request('<call service="test/echo"><array><float>0.5</float></array></call>').tag == "reply"
        assert calls == [[0.5]]  # the refused calls never reached the service

        stats = server.server.stats()
        (mine,) = stats.clients
        assert mine.out_of_range == len(cases) + 3 == stats.out_of_range
        assert mine.bad_documents == 0  # a value out of range is a good document with a bad value


# -- authentication ---------------------------------------------------------------------------------------------------


def test_with_a_token_nothing_is_served_before_the_auth(bus: Bus) -> None:
    bus.create_service("test/echo", lambda request: request)
    with (
        XmlServer(bus, ServerSettings(port=0, token="secret")) as server,
        Publisher(bus, "Base/Drive/State", 50.0, odometry),
        XmlClient(server.address) as client,
    ):
        assert client.start().get("auth") == "token"
        requests = [
            "<list/>",
            '<read name="Base/Drive/State"/>',
            '<read name="No/Such"/>',  # not even whether an interface exists
            '<subscribe name="Base/Drive/State" rate="50"/>',
            '<unsubscribe name="Base/Drive/State"/>',
            '<call service="test/echo"><int>1</int></call>',
            '<call service="mom/xmlserver"/>',
            WRITE,
        ]
        for request in requests:
            reply = client.request(request)
            assert error_code(reply) == "unauthorized", request
            assert "auth" in reply.get("reason", "") and len(reply) == 0, reply.attrib
        assert server.stats().topics == []  # the refused subscription subscribed to nothing on the bus
        assert error_code(client.request('<auth token="wrong"/>')) == "unauthorized"
        assert error_code(client.request('<read name="Base/Drive/State"/>')) == "unauthorized"
        assert client.updates == []  # no update came in all that time

        with XmlClient(server.address, source="127.0.0.2") as other:  # not slowed down by the wrong token
            other.start()
            assert other.request('<auth token="secret"/>').tag == "authorized"
            assert other.request('<read name="Base/Drive/State"/>').tag == "value"
            assert other.request('<subscribe name="Base/Drive/State" rate="50"/>').tag == "subscribed"
            other.wait_updates(2, "Base/Drive/State")


class FakeMonotonic:
    """The clock of the server's defences, set by the test."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_a_thousand_wrong_tokens_are_checked_a_few_times_and_logged_a_few_lines(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    """A client reconnecting 1,000 times a second, each time with a new guess."""
    caplog.set_level(logging.INFO, logger="pluto.xmlserver")
    clock = FakeMonotonic()
    settings = ServerSettings(port=0, token="the right one", auth_backoff=0.5, auth_backoff_max=30.0)
    with XmlServer(bus, settings, monotonic=clock) as server:
        replies: Counter[str] = Counter()
        for i in range(1000):
            with XmlClient(server.address, source="127.0.0.2") as guesser:
                guesser.start()
                reply = guesser.request(f'<auth token="guess {i}"/>')
                replies[error_code(reply)] += 1
            clock.t += 0.001
        stats = server.stats()
        # checked at 0 s and 0.5 s (the back-off doubles: the next is due at 1.5 s); the rest refused unchecked
        assert replies == {"unauthorized": 2, "rate-limited": 998}, replies
        assert (stats.auth_failures, stats.auth_refused) == (2, 998)
        wait_until(lambda: server.stats().clients == [], message="the guessers are gone")
        lines = [r.getMessage() for r in caplog.records if r.name == "pluto.xmlserver"]
        about_tokens = [m for m in lines if "wrong token" in m]
        counts = f"{len(lines)} log lines, {len(about_tokens)} about tokens"
        assert len(about_tokens) == 1, (counts, about_tokens)
        assert len(lines) <= 25, counts  # connections are logged sparingly too

        # someone else, with the right token, gets in at once
        with XmlClient(server.address, source="127.0.0.1") as user:
            user.start()
            assert user.request('<auth token="the right one"/>').tag == "authorized"
        # a while later, the count of what was not logged one by one is reported in one line
        clock.t += 20.0
        wait_until(
            lambda: any("999" in r.getMessage() and "127.0.0.2" in r.getMessage() for r in caplog.records),
            timeout=30.0,
            message="the summary of the wrong tokens is logged",
        )


# -- idle connections and connection caps -----------------------------------------------------------------------------


def test_three_hundred_idle_sockets_lock_no_one_out(bus: Bus) -> None:
    settings = ServerSettings(port=0, max_clients=50, max_clients_per_address=10)
    writer = bus.create_publisher("Base/Drive/State", msgs.Odometry)
    writer.write(msgs.Odometry(x=1.5))
    with XmlServer(bus, settings) as server:
        with XmlClient(server.address) as warm:  # the server's reader of the interface exists before the test
            warm.start()
            assert warm.request('<read name="Base/Drive/State"/>').tag == "value"
        idle = [XmlClient(server.address, source="127.0.0.2") for _ in range(300)]
        try:
            first = [client.document() for client in idle]  # every one is answered: a hello or a refusal
            served = [doc for doc in first if doc.tag == "hello"]
            refusals = [doc for doc in first if doc.tag == "error"]
            assert (len(served), len(refusals)) == (10, 290)
            assert all(error_code(doc) == "too-many-clients" for doc in refusals)
            assert "127.0.0.2" in refusals[0].get("reason", ""), refusals[0].attrib
            assert all(client.closed_by_server() for client, doc in zip(idle, first, strict=True) if doc.tag == "error")

            start = time.monotonic()
            with XmlClient(server.address, source="127.0.0.1") as newcomer:
                newcomer.start()
                value = newcomer.request('<read name="Base/Drive/State"/>')
                elapsed = time.monotonic() - start
            assert value.tag == "value" and elapsed < 1.0, elapsed
            wait_until(lambda: len(server.stats().clients) == 10, message="the newcomer is gone, the idle ones stay")
            assert server.stats().refused == 290
        finally:
            for client in idle:
                client.close()


def test_idle_clients_are_closed_saying_why_and_readers_are_not(bus: Bus) -> None:
    clock = FakeMonotonic()
    settings = ServerSettings(
        port=0, max_clients=8, max_clients_per_address=4, idle_timeout=30.0, write_buffer=1024, send_buffer=4096
    )
    scans = Publisher(bus, "Sick/Scan", 100.0, lambda i, now: msgs.LaserScan(stamp=now, ranges=[1.0 + i] * 181))
    with XmlServer(bus, settings, monotonic=clock) as server, Publisher(bus, "Base/Drive/State", 50.0, odometry), scans:
        reader = XmlClient(server.address, source="127.0.0.2")
        hog = XmlClient(server.address, source="127.0.0.2", rcvbuf=4096)
        idle = [XmlClient(server.address, source=f"127.0.0.{3 + i // 4}") for i in range(6)]
        try:
            for client in [reader, hog, *idle]:
                client.start()
            assert reader.request('<subscribe name="Base/Drive/State" rate="20"/>').tag == "subscribed"
            assert hog.request('<subscribe name="Sick/Scan" rate="100"/>').tag == "subscribed"
            with XmlClient(server.address) as late:  # eight already: refused, saying why
                refusal = late.document()
                assert error_code(refusal) == "too-many-clients" and "8" in refusal.get("reason", "")
            # the hog reads nothing: wait until what waits for it fills its buffers
            hog_port = hog.sock.getsockname()[1]

            def hog_stuck() -> bool:
                (stats,) = [c for c in server.stats().clients if c.peer.endswith(f":{hog_port}")]
                return stats.queued_bytes > 1024

            wait_until(hog_stuck, timeout=30.0, message="the hog's buffers are full")
            reader.wait_updates(2)

            clock.t += 31.0  # half a minute with nothing from anyone
            for client in idle:
                doc = client.document()
                assert error_code(doc) == "idle", doc.attrib
                assert "30 s" in doc.get("reason", ""), doc.attrib
                assert client.closed_by_server()
            wait_until(lambda: len(server.stats().clients) == 1, timeout=30.0, message="the idle ones are closed")
            # the one reading its subscription is still served
            count = len(reader.updates)
            reader.wait_updates(count + 5)
            assert reader.request("<list/>").tag == "listing"
            stats = server.stats()
            assert stats.idle_closed == 7
            with XmlClient(server.address) as newcomer:  # there is room again
                newcomer.start()
                assert newcomer.request('<read name="Base/Drive/State"/>').tag == "value"
        finally:
            for client in [reader, hog, *idle]:
                client.close()

"""Hostile input: each attack gets an ``<error>``, and the attacker's next request, the server and a client
subscribed meanwhile all carry on."""

from __future__ import annotations

import contextlib
import logging
import random
import socket
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import Element

import numpy as np
import pytest

from pluto import limits, msgs
from pluto.bus import Bus
from pluto.gateways.xmlserver.mapping import escape_attribute
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

        stats = {c.peer.rsplit(":", 1)[1]: c for c in server.server.stats(timeout=30.0).clients}
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

        stats = server.server.stats(timeout=30.0)
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
        assert server.stats(timeout=30.0).topics == []  # the refused subscription subscribed to nothing on the bus
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
        stats = server.stats(timeout=30.0)
        # checked at 0 s and 0.5 s (the back-off doubles: the next is due at 1.5 s); the rest refused unchecked
        assert replies == {"unauthorized": 2, "rate-limited": 998}, replies
        assert (stats.auth_failures, stats.auth_refused) == (2, 998)
        wait_until(lambda: server.stats(timeout=30.0).clients == [], message="the guessers are gone")
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


def wait_seen(server: XmlServer, count: int) -> None:
    """Wait until the server has taken in (served or refused) ``count`` connections since it started."""
    wait_until(
        lambda: server.stats(timeout=30.0).connections + server.stats(timeout=30.0).refused >= count,
        timeout=60.0,
        message=f"the server takes in {count} connections",
    )


def test_three_hundred_idle_sockets_lock_no_one_out(bus: Bus) -> None:
    """From another address: past the per-address cap each idle newcomer evicts the idle one silent longest, and a
    client from another address is served (the caps are never reached in all)."""
    settings = ServerSettings(port=0, max_clients=50, max_clients_per_address=10)
    writer = bus.create_publisher("Base/Drive/State", msgs.Odometry)
    writer.write(msgs.Odometry(x=1.5))
    with XmlServer(bus, settings) as server:
        with XmlClient(server.address) as warm:  # the server's reader of the interface exists before the test
            warm.start()
            assert warm.request('<read name="Base/Drive/State"/>').tag == "value"
        idle = [XmlClient(server.address, source="127.0.0.2") for _ in range(300)]
        try:
            first = [client.document() for client in idle]  # every one is served: a hello
            assert all(doc.tag == "hello" for doc in first)
            wait_seen(server, 301)
            for client in idle[:290]:  # the oldest ones made room for the newer ones, saying why
                notice = client.document()
                assert error_code(notice) == "too-many-clients", notice.attrib
                assert "at most 10 connections from 127.0.0.2" in notice.get("reason", ""), notice.attrib
                assert client.closed_by_server()
            with XmlClient(server.address, source="127.0.0.1") as newcomer:
                newcomer.start()
                assert newcomer.request('<read name="Base/Drive/State"/>').tag == "value"
            wait_until(
                lambda: len(server.stats(timeout=30.0).clients) == 10,
                message="the newcomer is gone, the idle ones stay",
            )
            stats = server.stats(timeout=30.0)
            assert (stats.evicted, stats.refused) == (290, 0)
            assert sorted(int(c.peer.rsplit(":", 1)[1]) for c in stats.clients) == sorted(
                client.sock.getsockname()[1] for client in idle[290:]
            )
        finally:
            for client in idle:
                client.close()


def test_three_hundred_idle_sockets_from_the_clients_own_address_do_not_lock_it_out(bus: Bus) -> None:
    """With the default caps (64 connections from one address, 100 in all), 300 idle sockets from 127.0.0.1 and
    then a client from 127.0.0.1 that is served, three times in a row (the idle sockets of each round kept open)."""
    writer = bus.create_publisher("Base/Drive/State", msgs.Odometry)
    writer.write(msgs.Odometry(x=1.5))
    idle: list[XmlClient] = []
    with XmlServer(bus, ServerSettings(port=0)) as server:
        try:
            for round_ in range(3):
                batch = [XmlClient(server.address, source="127.0.0.1") for _ in range(300)]
                idle += batch
                wait_seen(server, len(idle) + round_)
                with XmlClient(server.address, source="127.0.0.1") as client:
                    hello = client.document()
                    assert hello.tag == "hello", f"round {round_ + 1}: {hello.attrib}"
                    assert client.request('<read name="Base/Drive/State"/>').tag == "value"
                    assert client.request("<list/>").tag == "listing"
                assert batch[0].document().tag == "hello"  # served at first, then evicted, saying why
                notice = batch[0].document()
                assert error_code(notice) == "too-many-clients", notice.attrib
                reason = notice.get("reason", "")
                assert "at most 64 connections from 127.0.0.1" in reason and "makes room" in reason, reason
                assert batch[0].closed_by_server()
            stats = server.stats(timeout=30.0)
            assert stats.refused == 0
            assert stats.evicted >= 3 * 300 - 64, stats.evicted  # every idle socket but the last 64 made room
            assert stats.connections == 3 * 301
        finally:
            for client in idle:
                client.close()


def test_a_newcomer_evicts_the_longest_silent_connection_not_authenticated_or_subscribed(bus: Bus) -> None:
    """Past a cap the connection evicted is the one silent longest of those that have not authenticated or hold no
    subscription; when every one is authenticated and subscribed, the newcomer is refused."""
    clock = FakeMonotonic()
    settings = ServerSettings(port=0, token="s3cret", max_clients=3, max_clients_per_address=100)
    subscribe = '<subscribe name="Base/Drive/State" rate="1"/>'

    def joined(client: XmlClient, auth: bool = True, subscribed: bool = True) -> XmlClient:
        client.start()
        if auth:
            assert client.request('<auth token="s3cret"/>').tag == "authorized"
        if subscribed:
            assert client.request(subscribe).tag == "subscribed"
        return client

    def evicted(client: XmlClient, why: str) -> None:
        notice = client.reply()
        assert error_code(notice) == "too-many-clients", notice.attrib
        assert "at most 3 clients" in notice.get("reason", "") and why in notice.get("reason", ""), notice.attrib
        assert client.closed_by_server()

    with XmlServer(bus, settings, monotonic=clock) as server, contextlib.ExitStack() as stack:

        def later() -> None:
            server.stats(
                timeout=30.0
            )  # a turn of the server's loop: the replies sent so far are counted as taken, then
            clock.t += 1.0

        a = joined(stack.enter_context(XmlClient(server.address)))
        later()
        b = joined(stack.enter_context(XmlClient(server.address)), subscribed=False)
        later()
        c = joined(stack.enter_context(XmlClient(server.address)), auth=False, subscribed=False)
        d = joined(stack.enter_context(XmlClient(server.address)))  # B, authenticated but silent longest, goes
        evicted(b, "with no subscription and silent for 1.0 s")
        later()
        e = joined(stack.enter_context(XmlClient(server.address)))  # C, not authenticated, goes
        evicted(c, "not authenticated and silent for 1.0 s")
        with XmlClient(server.address) as f:  # A, D and E are authenticated and subscribed: refused
            refusal = f.document()
            assert error_code(refusal) == "too-many-clients", refusal.attrib
            assert "every one is authenticated and subscribed" in refusal.get("reason", ""), refusal.attrib
            assert f.closed_by_server()
        later()
        assert a.request('<unsubscribe name="Base/Drive/State"/>').tag == "unsubscribed"
        later()
        joined(stack.enter_context(XmlClient(server.address)), subscribed=False)  # A has no subscription: it goes
        evicted(a, "with no subscription and silent for 1.0 s")
        for client in (d, e):  # the others are served on
            assert client.request("<list/>").tag == "listing"
        stats = server.stats(timeout=30.0)
        assert (stats.evicted, stats.refused) == (3, 1)


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
            # slowly enough that the socket's buffers hold what comes while the test looks elsewhere
            assert reader.request('<subscribe name="Base/Drive/State" rate="2"/>').tag == "subscribed"
            assert hog.request('<subscribe name="Sick/Scan" rate="100"/>').tag == "subscribed"
            server.stats(timeout=30.0)  # a turn of the server's loop: what it sent so far is counted as taken, then
            clock.t += 1.0
            for client in idle[1:]:  # the first idle one is now the one silent longest
                assert error_code(client.request('<unsubscribe name="Sick/Scan"/>')) == "not-subscribed"
            with XmlClient(server.address) as late:  # eight already: the first idle one makes room, saying why
                late.start()
                notice = idle[0].reply()
                assert error_code(notice) == "too-many-clients" and "8" in notice.get("reason", ""), notice.attrib
                assert idle[0].closed_by_server()
                assert late.request("<list/>").tag == "listing"
            wait_until(
                lambda: len(server.stats(timeout=30.0).clients) == 7,
                message="the evicted one and the late one are gone",
            )
            # the hog reads nothing: wait until its buffers are full (updates are skipped, and nothing more is sent)
            hog_port = hog.sock.getsockname()[1]
            seen: list[tuple[int, int]] = []

            def hog_stuck() -> bool:
                (stats,) = [c for c in server.stats(timeout=30.0).clients if c.peer.endswith(f":{hog_port}")]
                seen.append((stats.bytes_sent, stats.updates_skipped))
                return len(seen) > 1 and seen[-1][0] == seen[-2][0] and seen[-1][1] > seen[-2][1] + 2

            wait_until(hog_stuck, timeout=30.0, interval=0.1, message="the hog's buffers are full")
            reader.wait_updates(2)

            clock.t += 31.0  # half a minute with nothing from anyone
            for client in idle[1:]:
                doc = client.document()
                assert error_code(doc) == "idle", doc.attrib
                assert "30 s" in doc.get("reason", ""), doc.attrib
                assert client.closed_by_server()
            wait_until(
                lambda: [c.subscriptions for c in server.stats(timeout=30.0).clients] == [["Base/Drive/State"]],
                timeout=30.0,
                message="the idle ones and the hog are closed, the reader is not",
            )
            # the one reading its subscription is still served
            count = len(reader.updates)
            reader.wait_updates(count + 3)
            assert reader.request("<list/>").tag == "listing"
            stats = server.stats(timeout=30.0)
            assert (stats.idle_closed, stats.evicted, stats.refused) == (6, 1, 0)
            with XmlClient(server.address) as newcomer:  # there is room again
                newcomer.start()
                assert newcomer.request('<read name="Base/Drive/State"/>').tag == "value"
        finally:
            for client in [reader, hog, *idle]:
                client.close()


# -- fuzzing ----------------------------------------------------------------------------------------------------------

GOOD_REQUESTS = [
    '<read id="{id}" name="Base/Drive/State"/>',
    '<subscribe id="{id}" name="Base/Drive/State" rate="5"/>',
    '<unsubscribe id="{id}" name="Base/Drive/State"/>',
    '<write id="{id}" name="drive/command"><ActuatorState cmd_flags="0"><velocity>0.1 0.2</velocity></ActuatorState>'
    "</write>",
    '<write id="{id}" name="Wrist/Command"><ActuatorState><position>0.5 0.1</position></ActuatorState></write>',
    '<call id="{id}" service="test/echo"><map><item key="kp"><float>0.5</float></item></map></call>',
    '<auth id="{id}" token="fuzz-token"/>',
]
NUMBERS = ["1e308", "-1e308", "1e309", "NaN", "INF", "-0", "9" * 400, "1e-400", "0x10", "1_0", "٣", "3.5", "1e9"]


def hostile(rng: random.Random) -> tuple[str, bytes]:
    """One hostile payload: its kind and its bytes (most end with a newline; a partial one does not)."""
    kind = rng.choice(
        ["bytes", "mutated", "numbers", "vector", "nesting", "attribute", "partial", "oversize", "dtd", "auth", "text"]
    )
    good = rng.choice(GOOD_REQUESTS).format(id=rng.randint(0, 10**6))
    if kind == "bytes":
        data = rng.randbytes(rng.randint(1, 3000))
    elif kind == "mutated":  # a good request with a few bytes changed, removed or repeated
        raw = bytearray(good.encode())
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(raw))
            choice = rng.random()
            if choice < 0.4:
                raw[i] = rng.randrange(256)
            elif choice < 0.7:
                del raw[i]
            else:
                raw[i:i] = raw[i : i + rng.randint(1, 40)] * rng.randint(1, 50)
        data = bytes(raw)
    elif kind == "numbers":
        numbers = " ".join(rng.choice(NUMBERS) for _ in range(rng.randint(1, 4)))
        target = rng.choice(["drive/command", "Base/Drive/Command", "Wrist/Command", "Arm/Command", "motion/command"])
        attribute = rng.choice(["stamp", "cmd_flags"])
        data = (
            f'<write name="{target}"><ActuatorState {attribute}="{rng.choice(NUMBERS)}"><velocity>{numbers}'
            f"</velocity></ActuatorState></write>"
        ).encode()
        if rng.random() < 0.3:
            data = f'<call service="test/echo"><array><float>{rng.choice(NUMBERS)}</float></array></call>'.encode()
    elif kind == "vector":
        count = rng.choice([3, 33, 4097, 60_000])
        data = f'<write name="drive/command"><ActuatorState><velocity>{"0 " * count}</velocity></ActuatorState></write>'
        data = data.encode()
    elif kind == "nesting":
        depth = rng.choice([17, 100, 5000])
        data = b"<a>" * depth + b"</a>" * rng.choice([0, depth])
    elif kind == "attribute":
        size = rng.choice([100, 10_000, 60_000])
        many = 'a="1" ' * (size // 6)
        data = rng.choice(
            [f'<read name="{"x" * size}"/>', f'<read id="{"i" * size}" name="a"/>', f"<list {many}/>"]
        ).encode()
    elif kind == "partial":
        raw = good.encode()
        return kind, raw[: rng.randrange(1, len(raw))]
    elif kind == "oversize":
        data = b"<list " + b"x" * 70_000 + b"/>"
    elif kind == "dtd":
        data = rng.choice(
            [
                BILLION_LAUGHS,
                b'<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><read name="&x;"/>',
                b'<?xml version="1.0" encoding="UTF-7"?><list/>',
                b"<![CDATA[<list/>]]>",
                b"<!-- --><list/><list/>",
                b'<x:read xmlns:x="urn:x" name="Base/Drive/State"/>',
            ]
        )
    elif kind == "auth":
        token = "fuzz-token" if rng.random() < 0.5 else rng.choice(["", "fuzz", "fuzz-token ", "\x00", "x" * 5000])
        data = f'<auth token="{escape_attribute(token)}"/>'.encode()
    else:  # text the parser may choke on
        data = "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randint(1, 300))).encode("utf-8")
    return kind, data + b"\n"


def test_fuzz_while_a_well_behaved_client_is_served(bus: Bus) -> None:
    """A seeded stream of hostile documents on one connection (reconnecting whenever the server closes it), and
    between them a well-behaved client whose every read and write must be served."""
    rng = random.Random(1969)
    clock = FakeMonotonic()
    settings = ServerSettings(
        port=0,
        token="fuzz-token",
        max_document=64 * 1024,
        request_rate=100_000.0,
        request_burst=100_000,
        auth_backoff=0.2,
        auth_backoff_max=1.0,
    )
    written: list[tuple[str, msgs.ActuatorState]] = []
    for name in ("drive/command", "Base/Drive/Command", "Wrist/Command", "Arm/Command", "motion/command"):
        bus.create_subscription(name, lambda v, name=name: written.append((name, v)), msgs.ActuatorState, depth=4096)
    bus.create_service("test/echo", lambda request: request)
    counts: Counter[str] = Counter()
    kinds: Counter[str] = Counter()

    def connect_fuzzer(address: tuple[str, int]) -> XmlClient:
        fuzzer = XmlClient(address, timeout=30.0, source="127.0.0.2")
        counts["fuzzer connections"] += 1
        with contextlib.suppress(EOFError, ConnectionError):  # refused: the next round connects again
            fuzzer.start()
        return fuzzer

    def summary() -> str:
        return ", ".join(f"{value} {key}" for key, value in counts.items()) + f"; payloads by kind: {dict(kinds)}"

    with (
        XmlServer(bus, settings, monotonic=clock) as server,
        Publisher(bus, "Base/Drive/State", 50.0, odometry),
        XmlClient(server.address, timeout=30.0) as good,
    ):
        good.start()
        assert good.request('<auth token="fuzz-token"/>').tag == "authorized"
        assert good.request('<subscribe name="Base/Drive/State" rate="20"/>').tag == "subscribed"
        fuzzer = connect_fuzzer(server.address)
        try:
            for round in range(400):
                clock.t += 0.05
                sent = b""
                for _ in range(rng.randint(1, 3)):
                    kind, payload = hostile(rng)
                    kinds[kind] += 1
                    sent += payload
                counts["payload bytes"] += len(sent)
                try:
                    fuzzer.send(sent + f'\n<read id="sync{round}" name="Base/Drive/State"/>\n'.encode())
                    while (doc := fuzzer.document()).get("id") != f"sync{round}":
                        counts["fuzzer errors" if doc.tag == "error" else "fuzzer other replies"] += 1
                    counts["fuzzer rounds answered"] += 1
                except (EOFError, ConnectionError):
                    counts["closed by the server"] += 1
                    fuzzer.close()
                    fuzzer = connect_fuzzer(server.address)

                v = round % 10 / 10.0
                write = f'<write name="drive/command"><ActuatorState><velocity>{v} 0</velocity></ActuatorState></write>'
                assert good.request(write).tag == "written", summary()
                assert good.request('<read name="Base/Drive/State"/>').tag == "value", summary()
                counts["good replies"] += 2
        finally:
            fuzzer.close()
        updates = len(good.updates)
        good.wait_updates(updates + 2)  # its subscription still streams
        stats = server.stats(timeout=30.0)
        counts["out of range refused"] = stats.out_of_range
        counts["wrong tokens checked"] = stats.auth_failures
        counts["token attempts refused in the back-off"] = stats.auth_refused
        print(f"\nfuzz: {summary()}")
        assert counts["good replies"] == 800, summary()
        assert counts["fuzzer errors"] > 400 and counts["fuzzer rounds answered"] > 200, summary()
        assert stats.out_of_range > 10 and stats.auth_failures > 0, summary()
    # nothing out of range reached the bus: every command written there passes the limits
    for name, value in written:
        limits.check(name, value)
    assert sum(1 for name, _ in written if name == "drive/command") >= 400, summary()

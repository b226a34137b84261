"""Hostile input: each attack gets an ``<error>``, and the attacker's next request, the server and a client
subscribed meanwhile all carry on."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from xml.etree.ElementTree import Element

import numpy as np

from pluto.bus import Bus
from pluto.gateways.xmlserver.module import XmlServerModule
from tests.gateways.xmlserver.client import XmlClient, error_code
from tests.gateways.xmlserver.conftest import Publisher, odometry
from tests.gateways.xmlserver.test_codec import BILLION_LAUGHS

WRITE = '<write name="drive/command"><ActuatorState><velocity>1.0 0</velocity></ActuatorState></write>'


def errors_until(client: XmlClient, request_id: str) -> list[Element]:
    """The errors received before the reply with id ``request_id`` (which must be a value)."""
    errors = []
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
        ("a write without the token", WRITE.encode() + b"\n", {"unauthorized"}),
    ]
    with (
        Publisher(bus, "Base/Drive/State", 50.0, odometry),
        XmlClient(address) as victim,
        XmlClient(address) as attacker,
    ):
        victim.start()
        attacker.start()
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

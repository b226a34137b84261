"""What a user reads when the bus cannot be opened: one line in words, without the places in Zenoh's sources."""

from __future__ import annotations

import socket

import pytest

from pluto.bus import Bus, BusConfig, BusError
from pluto.bus.session import zenoh_reason


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_router_is_told_without_zenoh_source_paths() -> None:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    with pytest.raises(BusError) as caught:
        Bus(BusConfig(robot="unreachable", connect=[endpoint], connect_timeout=0.5))
    message = str(caught.value)
    assert message.startswith(f"cannot open the bus at {endpoint} (is `pluto router` running there?): ")
    assert ".rs" not in message and ".cargo" not in message
    assert f"[{endpoint}]" in message  # the endpoint as written, not Zenoh's Single(...)


def test_zenoh_reason_keeps_the_words_and_drops_the_sources() -> None:
    checkout = "/root/.cargo/git/checkouts/zenoh-9c599d5ef3e0480e/cc83980/io"
    err = RuntimeError(
        "Can not create a new TCP listener bound to tcp/127.0.0.1:7448: [127.0.0.1:7448: Address already in use "
        f"(os error 98) at {checkout}/zenoh-link-commons/src/tcp.rs:61.] at {checkout}/zenoh-links/zenoh-link-tcp/"
        "src/unicast.rs:338."
    )
    assert zenoh_reason(err) == (
        "Can not create a new TCP listener bound to tcp/127.0.0.1:7448: [127.0.0.1:7448: Address already in use "
        "(os error 98)]"
    )

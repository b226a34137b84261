"""A site's router for a fleet: its thinning rules, and the thinning itself on the wire through ``pluto router``.

On the loopback the router thins what leaves by ``lo`` (every client here is on it). A dropped message leaves nothing
to wait for, so the check waits for a status written after the scans: statuses pass untouched, and Zenoh keeps one
session's messages in order on its link, so once the status is in, every scan that was let through is too.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import zenoh

from pluto.bus.fleet import THIN_RATES, thinning_config
from tests.bus.test_two_processes import Peer
from tests.helpers import free_tcp_port

TIMEOUT = 20.0


def test_one_rule_per_robot_and_interface_on_the_named_links_only() -> None:
    [entry] = thinning_config(["wg0", "eth1"], ["r1", "r2"])
    assert entry["interfaces"] == ["wg0", "eth1"] and entry["flows"] == ["egress"] and entry["messages"] == ["put"]
    rules = {rule["key_expr"]: rule["freq"] for rule in entry["rules"]}
    assert rules["pluto/r1/Sick/Scan"] == rules["pluto/r2/Sick/Scan"] == 1.0
    assert rules["pluto/r2/Localization/Pose"] == 5.0
    assert len(rules) == 2 * len(THIN_RATES)
    assert not any("*" in key for key in rules)  # a wildcard would share one rate among robots
    assert not any(key.endswith(("command", "status")) or "/@" in key for key in rules)  # commands, calls pass


@pytest.mark.parametrize(
    ("interfaces", "robots", "message"),
    [([], ["r1"], "--thin IFACE"), (["wg0"], [], "--thin-robot"), (["wg0"], ["a/b"], "may not be empty or contain")],
)
def test_thinning_without_a_link_or_a_robot_is_refused(interfaces: list[str], robots: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        thinning_config(interfaces, robots)


def test_the_router_refuses_robots_to_thin_without_a_link() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pluto", "router", "--thin-robot", "r1"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "add --thin IFACE" in done.stderr and "Traceback" not in done.stderr


def _client(endpoint: str) -> zenoh.Session:
    conf = zenoh.Config()
    conf.insert_json5("mode", '"client"')
    conf.insert_json5("connect/endpoints", f'["{endpoint}"]')
    conf.insert_json5("scouting/multicast/enabled", "false")
    return zenoh.open(conf)


@pytest.fixture
def router(tmp_path: object) -> Iterator[str]:
    port = free_tcp_port()
    endpoint = f"tcp/127.0.0.1:{port}"
    args = ["router", "--listen", endpoint, "--thin", "lo", "--thin-robot", "near"]
    stderr = tmp_path / "router.err"  # type: ignore[operator]
    with stderr.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "pluto", *args], stdout=subprocess.PIPE, stderr=err, text=True)
    peer = Peer(proc, stderr)
    try:
        line = peer.lines.get(timeout=TIMEOUT)
        assert line is not None and line.startswith("router listening"), peer.stderr()
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(TIMEOUT)


def test_a_thinned_link_carries_a_robots_scans_at_1_hz_and_its_statuses_all(router: str) -> None:
    writer, reader = _client(router), _client(router)
    try:
        counts: Counter[str] = Counter()
        done = threading.Event()

        def received(sample: zenoh.Sample) -> None:
            key = str(sample.key_expr)
            counts[key] += 1
            if key == "pluto/near/drive/status" and sample.payload.to_bytes() == b"last":
                done.set()

        subscriber = reader.declare_subscriber("pluto/**", received)
        # The subscription must have reached the router before the counted writes: write a status until it is in.
        deadline = time.monotonic() + TIMEOUT
        while counts["pluto/near/drive/status"] == 0 and time.monotonic() < deadline:
            writer.put("pluto/near/drive/status", b"hello")
            time.sleep(0.05)
        assert counts["pluto/near/drive/status"] > 0, "the reader never heard the writer through the router"
        counts.clear()
        start = time.monotonic()
        for _ in range(60):
            writer.put("pluto/near/Sick/Scan", b"s" * 2000)  # thinned for near
            writer.put("pluto/far/Sick/Scan", b"s" * 2000)  # a robot the router does not thin
            writer.put("pluto/near/drive/status", b"x")
            time.sleep(0.02)
        elapsed = time.monotonic() - start
        writer.put("pluto/near/drive/status", b"last")
        assert done.wait(TIMEOUT), counts
        subscriber.undeclare()
    finally:
        writer.close()  # type: ignore[no-untyped-call]
        reader.close()  # type: ignore[no-untyped-call]
    assert counts["pluto/near/drive/status"] == 61, counts
    assert counts["pluto/far/Sick/Scan"] == 60, counts
    # One scan a second, the first at once: however long a busy machine took to write the 60 (about 1.2 s).
    assert 1 <= counts["pluto/near/Sick/Scan"] <= 1 + math.ceil(elapsed), (counts, elapsed)

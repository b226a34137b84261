"""Fuzz harness for the P2OS streaming decoder (not collected by pytest).

With atheris installed it runs under libFuzzer (coverage-guided)::

    python -m tests.hardware.base.p2os.fuzz_decoder -atheris_runs=1000000

Without atheris it feeds seeded random inputs for a while::

    python -m tests.hardware.base.p2os.fuzz_decoder --seconds 30 --seed 1

Each input is decoded in both roles, cut into chunks chosen by the input itself, then closed. Checked: nothing
raises; the buffer stays under one packet; every byte is accounted for; every event re-encodes to a packet of the
same length that decodes to the same event; after the end of the stream only ConnectionClosed remains.
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
import time
from typing import Any, Literal

from pluto.hardware.base.p2os import (
    MAX_PACKET_SIZE,
    NEED_DATA,
    ArgumentKind,
    Command,
    ConnectionClosed,
    Event,
    P2osDecoder,
    Sip,
    SonarReading,
    SyncReply,
    command_argument_kind,
    encode_command,
    frame,
)

ROLES: tuple[Literal["client", "robot"], ...] = ("client", "robot")


def check_one(data: bytes) -> None:
    """Decode ``data`` in both roles and check the decoder's invariants (raises AssertionError on a bug)."""
    for role in ROLES:
        decoder = P2osDecoder(role)
        events: list[Event] = []
        # The first byte picks the chunk size, so the fuzzer explores chunking too.
        step = (data[0] % 17 + 1) if data else 1
        for start in range(0, len(data), step):
            decoder.receive_data(data[start : start + step])
            assert decoder.buffered_bytes < MAX_PACKET_SIZE
            while (event := decoder.next_event()) is not NEED_DATA:
                events.append(event)
        stats = decoder.statistics()
        packet_bytes = 0
        for event in events:
            assert not isinstance(event, ConnectionClosed)
            wire = event.encode()
            packet_bytes += len(wire)
            again = P2osDecoder(role)
            again.receive_data(wire)
            assert again.next_event() == event, (role, event)
        accounted = stats.garbage_bytes + packet_bytes + decoder.buffered_bytes
        assert accounted == stats.bytes if stats.malformed == 0 else accounted < stats.bytes
        assert stats.bytes == len(data)
        assert decoder.last_error is None or not decoder.last_error.startswith("decoded values rejected")
        decoder.receive_data(b"")
        tail = list(decoder.events())
        assert tail and tail[-1] == ConnectionClosed()
        assert decoder.buffered_bytes == 0


def random_input(rng: random.Random) -> bytes:
    """Valid packets of both directions, garbage and corrupted bytes, mixed."""
    parts: list[bytes] = []
    for _ in range(rng.randint(0, 12)):
        choice = rng.random()
        if choice < 0.3:
            parts.append(rng.randbytes(rng.randint(0, 60)))
        elif choice < 0.5:
            command = rng.choice(sorted(set(Command)))
            if command_argument_kind(command) is ArgumentKind.STRING:
                parts.append(encode_command(command, rng.randbytes(rng.randint(0, 30))))
            else:
                parts.append(encode_command(command, rng.randint(-65535, 65535)))
        elif choice < 0.7:
            sonars = tuple(SonarReading(rng.randint(0, 255), rng.randint(0, 65535)) for _ in range(rng.randint(0, 8)))
            parts.append(Sip(x=rng.randint(0, 0x7FFF), theta=rng.randint(-2048, 2047), sonars=sonars).encode())
        elif choice < 0.8:
            parts.append(SyncReply(2, "AMRISim", "Pioneer", "p3dx").encode())
        else:
            parts.append(frame(bytes((rng.randint(0, 255),)) + rng.randbytes(rng.randint(0, 40))))
    data = bytearray(b"".join(parts))
    for _ in range(rng.randint(0, 4)):
        if data:
            data[rng.randrange(len(data))] = rng.randint(0, 255)
    return bytes(data)


def run_random(seconds: float, seed: int) -> int:
    """Check random inputs for ``seconds``; return how many were checked."""
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    count = 0
    while time.monotonic() < deadline:
        data = random_input(rng)
        try:
            check_one(data)
        except Exception:
            print(f"failing input ({len(data)} bytes): {data.hex()}", file=sys.stderr)
            raise
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    try:
        atheris: Any = importlib.import_module("atheris")
    except ImportError:
        atheris = None
    if atheris is not None:
        atheris.Setup(sys.argv if argv is None else [sys.argv[0], *argv], check_one)
        atheris.Fuzz()
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to run (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    args = parser.parse_args(argv)
    count = run_random(args.seconds, args.seed)
    print(f"{count} random inputs checked in {args.seconds:g} s (seed {args.seed}), no failure")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A probe on the bus, for test_namespaces.py (run inside a network namespace with the test's environment).

``read NAME``: wait for a value of interface NAME (a late joiner's read) and print it as JSON.
``call SERVICE``: call SERVICE with no request and print the reply as JSON.
``watch MODULE``: print ``up`` once MODULE is alive, ``down`` once it is gone, ``up`` once it is back, then exit.
Each step waits at most 20 s; a timeout exits with status 1 and says what was not seen.
"""

from __future__ import annotations

import sys

import msgspec

from pluto.bus import Bus
from pluto.errors import BusTimeout

TIMEOUT = 20.0


def main(argv: list[str]) -> int:
    verb, name = argv
    with Bus() as bus:
        try:
            if verb == "read":
                reader = bus.create_reader(name)
                value = reader.read() or reader.wait_for_update(timeout=TIMEOUT)
                print(msgspec.json.encode(value).decode(), flush=True)
            elif verb == "call":
                print(msgspec.json.encode(bus.call(name, timeout=TIMEOUT)).decode(), flush=True)
            elif verb == "watch":
                for alive in (True, False, True):
                    bus.wait_for_module(name, TIMEOUT, alive=alive)
                    print("up" if alive else "down", flush=True)
            else:
                print(f"unknown verb {verb!r}", file=sys.stderr)
                return 2
        except BusTimeout as err:
            print(f"timeout: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

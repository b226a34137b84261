"""A module in a process of its own, for test_two_processes.py (run with ``sys.executable``, the test's environment).

It writes ``Base/Drive/State`` (an Odometry with x=1.5), serves ``peer/add`` (the sum of a list), declares the module
``peer``, and echoes each velocity command of ``Base/Drive/Command`` back as the ``v`` of a new Odometry. It prints
``ready`` once all of that is declared, then runs until stdin closes or says ``quit`` (or it is terminated).
"""

from __future__ import annotations

import sys

from pluto import msgs
from pluto.bus import Bus


def main() -> int:
    with Bus() as bus:
        state = bus.create_publisher("Base/Drive/State")
        state.write(msgs.Odometry(x=1.5))

        def on_command(command: msgs.ActuatorState) -> None:
            velocity = command.velocity[0] if command.velocity else 0.0
            state.write(msgs.Odometry(x=1.5, v=velocity))

        bus.create_subscription("Base/Drive/Command", on_command, depth=10)
        bus.create_service("peer/add", lambda values: sum(values))
        bus.declare_module("peer")
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "quit":
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``pluto demo``: the most complete mission Pluto can run so far, on this machine, ending by itself.

For now it brings up the ``demo`` profile (a heartbeat and its monitor, each in its own process, started in
dependency order by the supervisor), shows MOM, reports what the monitor measures, and shuts everything down.
"""

from __future__ import annotations

import time

from pluto import msgs
from pluto.bus import Bus, BusTimeout
from pluto.runtime import launcher, mom
from pluto.runtime.config import Config
from pluto.runtime.profiles import load_profile
from pluto.runtime.runner import stop_on_signals
from pluto.runtime.supervisor import Supervisor


def run_demo(config: Config, duration: float = 6.0) -> int:
    """Run the demonstration; return the exit status (0 if the mission succeeded)."""
    profile = load_profile("demo")
    with stop_on_signals() as stop, Bus(config.bus) as bus:
        supervisor = Supervisor(bus, profile, config)
        print(f"Pluto demo on robot '{bus.robot}': starting profile '{profile.name}' ({profile.description})")
        t0 = time.monotonic()
        try:
            supervisor.start()
            print(f"all {len(profile.entries)} modules publishing after {time.monotonic() - t0:.2f} s\n")
            print(mom.render(mom.snapshot(bus), bus.robot) + "\n")
            monitor = bus.create_reader("Heartbeat/Monitor", msgs.FVectorState)
            end = time.monotonic() + duration
            last: msgs.FVectorState | None = None
            while time.monotonic() < end and not stop.is_set():
                try:
                    last = monitor.wait_for_update(timeout=min(1.5, max(0.05, end - time.monotonic())))
                except BusTimeout:
                    continue
                rate, age = last.data[0], last.data[1]
                print(f"  monitor: heartbeat at {rate:5.1f} Hz, last beat {age * 1000:4.0f} ms ago, "
                      f"{last.element[0]} beats seen", flush=True)
            if stop.is_set():
                print("\ninterrupted; stopping")
            else:
                print("\n" + mom.render(mom.snapshot(bus), bus.robot))
        finally:
            supervisor.shutdown()
    logs = launcher.runtime_dir(bus.robot)
    ok = last is not None and last.element[1] == 0 and last.element[0] > 0
    print(f"\nmission {'done' if ok else 'FAILED'}: all modules stopped. Logs of each module: {logs}/")
    return 0 if ok or stop.is_set() else 1

"""``pluto info``: one interface: its type and meaning, who writes it, who reads it, how fast and how fresh.

Strategy: every value carries its writer's id. The command asks MOM which module owns each writer and which
modules read the interface (and which writer ids they heard lately), then listens to the interface itself for a
moment (``--listen``) and asks its writers for their current value, so it also sees writers no module owns (a
command line, a script) and measures the rate and the age of the newest value.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import TYPE_CHECKING

from pluto.cli.command import Subparsers, add_parser
from pluto.errors import ConfigError

if TYPE_CHECKING:
    import zenoh

    from pluto.bus import Bus
    from pluto.runtime import mom

__all__ = ["Heard", "listen", "register", "run"]

DESCRIPTION = """\
Shows an interface's message type and meaning, its writers (the module owning each, or "unnamed" for a command
line or script), the modules that read it, its rate and the age of its newest value. It listens to the interface
for --listen seconds (default 1.5) to measure the rate.

examples:
  pluto info drive/command        who commands the drive (two writers fight: MOM warns too)
  pluto info Base/Drive/State
"""


def register(subparsers: Subparsers) -> None:
    """Register the ``info`` subcommand."""
    p = add_parser(subparsers, "info", run, "an interface's type, writers, readers, rate and age", DESCRIPTION)
    p.add_argument("name", metavar="NAME", help="interface name (`pluto list` shows those with a value)")
    p.add_argument("--listen", type=float, default=1.5, metavar="S", help="seconds to listen (default 1.5)")


class Heard:
    """What listening to an interface found: per writer id, the values heard and the newest write time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[int, int] = {}
        self.last_write: dict[int, float] = {}
        self.commands = False

    def note(self, wid: int, written: float, flags: int, live: bool) -> None:
        from pluto.bus.session import COMMAND

        with self._lock:
            if live:
                self.counts[wid] = self.counts.get(wid, 0) + 1
            else:
                self.counts.setdefault(wid, 0)
            self.last_write[wid] = max(self.last_write.get(wid, 0.0), written)
            self.commands = self.commands or bool(flags & COMMAND)


def listen(bus: Bus, name: str, seconds: float) -> Heard:
    """Ask the writers of ``name`` for their current value, then count the values written for ``seconds``."""
    import zenoh

    from pluto.bus.session import write_mark

    heard = Heard()
    key = bus.key(name)

    def on_sample(sample: zenoh.Sample) -> None:
        written, _seq, wid, flags = write_mark(sample.attachment)
        heard.note(wid, written or time.time(), flags, live=True)

    sub = bus.declare_subscriber(key, on_sample)
    try:
        bus.settle()
        for reply in bus.query(key, timeout=min(1.0, max(seconds, 0.1)), consolidation=zenoh.ConsolidationMode.NONE):
            if reply.ok is not None:
                written, _seq, wid, flags = write_mark(reply.ok.attachment)
                heard.note(wid, written, flags, live=False)
        time.sleep(seconds)
    finally:
        bus.release(sub)
    return heard


def _age(last: float, now: float) -> str:
    if not last:
        return "never"
    age = max(0.0, now - last)
    return f"{age * 1000:.0f} ms ago" if age < 1 else f"{age:.1f} s ago"


def run(args: argparse.Namespace) -> int:
    """Print what is known of the interface.

    Returns:
        0.

    Raises:
        ConfigError: a bad name or --listen.
        BusError: the bus cannot be opened.
    """
    from pluto import names
    from pluto.cli.common import open_bus
    from pluto.runtime import mom

    name = names.check_name(args.name)
    if not 0.0 <= args.listen <= 60.0:
        raise ConfigError(f"--listen must be in [0, 60] s, got {args.listen}")
    kind = names.message_type_of(name)
    with open_bus(args) as bus:
        rows = mom.snapshot(bus)
        heard = listen(bus, name, args.listen)
        labels = bus.writer_labels(timeout=0.5)
        use = mom.interface_uses(rows, labels=labels).get(name) or mom.InterfaceUse(
            name, kind.__name__ if kind else "?"
        )
    now = time.time()
    out = _meaning(name, kind.__name__ if kind else use.type)
    out += _writer_lines(use, heard, labels, args.listen, now)
    out.append(f"readers (modules): {', '.join(use.readers) if use.readers else 'none'}")
    out.append("  (readers outside modules, such as `pluto echo`, cannot be seen)")
    newest = max(heard.last_write.values(), default=0.0)
    if args.listen > 0:
        total = sum(heard.counts.values())
        out.append(f"rate: {total / args.listen:.1f} Hz over {args.listen:g} s; newest value {_age(newest, now)}")
    print("\n".join(out))
    return 0


def _meaning(name: str, type_name: str) -> list[str]:
    """The first lines: the interface and its type, then what the project says it is (its description, usual
    writer and readers, how long a command holds) when it is one it knows."""
    from pluto import names

    out = [f"{name}  ({type_name})"]
    known = names.INTERFACES.get(name)
    if known is not None:
        out.append(f"  {known.description}")
        out.append(f"  usually written by {known.writer}, read by {known.readers}")
    max_age = names.command_max_age(name)
    if max_age is not None:
        out.append(f"  a command: good for {max_age:g} s after it arrives, never handed to a reader that joins later")
    return out


def _writer_lines(use: mom.InterfaceUse, heard: Heard, labels: dict[int, str], seconds: float, now: float) -> list[str]:
    """The writers: those MOM knows and those only heard while listening (``seconds``), each with its rate, its
    newest value's age and its id, and a warning when more than one writes."""
    from pluto.runtime import mom

    writers = {w.writer_id: w for w in use.writers}
    for wid in heard.counts:
        if wid and wid not in writers:
            writers[wid] = mom.Writer(None, wid, recent=True, label=labels.get(wid, ""))
    out = [f"writers: {len(writers)}" if writers else "writers: none (nobody wrote it lately)"]
    out += [f"  {writer.describe()}  ({_writer_facts(writer, heard, seconds, now)})" for writer in writers.values()]
    if len(use.rivals()) > 1 or len([w for w in heard.counts if w]) > 1:
        out.append("  warning: more than one writer: each new value replaces the other's (they fight)")
    return out


def _writer_facts(writer: mom.Writer, heard: Heard, seconds: float, now: float) -> str:
    """A writer's rate (as heard, else as its module counts it), its newest value's age and its id."""
    wid = writer.writer_id
    count = heard.counts.get(wid)
    rate = f"{count / seconds:.1f} Hz heard" if count is not None and seconds > 0 else ""
    if writer.module is not None:
        rate = rate or f"{writer.rate_hz:.1f} Hz"
    last = max(writer.last_write, heard.last_write.get(wid, 0.0))
    return ", ".join(x for x in (rate, f"last {_age(last, now)}" if last else "", f"id {wid:#x}") if x)

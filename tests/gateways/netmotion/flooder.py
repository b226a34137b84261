"""A UDP flood for the NetworkMotionServer's tests, run as a process of its own.

    python flooder.py HOST PORT SOCKETS RATE [SOURCES [PAYLOAD]]

Binds SOCKETS sockets (distinct source ports) and sends PAYLOAD (``PING``) from each of them to HOST:PORT, RATE
datagrams per second per socket (0: as fast as it can), the sockets in turn, until its standard input closes; then
prints ``sent <n>``. SOURCES is the number of source hosts the sockets are spread over: 1 (the default) binds them
all to 127.0.0.1; more binds socket i to the i-th of 127.1.0.1, 127.1.0.2, ... (every 127/8 address is this
computer's loopback), so the flood comes from that many hosts. Prints ``ready`` once the sockets are bound. A
flooder that falls behind (a busy machine) catches up by at most a tenth of a second of datagrams at once.
"""

from __future__ import annotations

import socket
import sys
import threading
import time


def main(argv: list[str]) -> int:
    host, port, count, rate = argv[0], int(argv[1]), int(argv[2]), float(argv[3])
    sources = int(argv[4]) if len(argv) > 4 else 1
    payload = argv[5].encode("ascii") if len(argv) > 5 else b"PING"
    address = (host, port)
    socks = []
    for i in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        n = i % sources
        sock.bind(("127.0.0.1" if sources == 1 else f"127.1.{n // 250}.{n % 250 + 1}", 0))
        sock.setblocking(False)
        socks.append(sock)
    done = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()
        done.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    print("ready", flush=True)
    sent = 0
    rounds = 0
    start = time.monotonic()
    while not done.is_set():
        if rate > 0:
            due = (time.monotonic() - start) * rate
            if rounds >= due:
                time.sleep(min(0.01, (rounds + 1 - due) / rate))
                continue
            rounds = max(rounds, int(due - rate / 10))  # behind by more than 0.1 s: skip the rest
        for sock in socks:
            try:
                sock.sendto(payload, address)
                sent += 1
            except OSError:  # the kernel's buffer full, or an ICMP error: a flood does not care
                pass
        rounds += 1
    print(f"sent {sent}", flush=True)
    for sock in socks:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

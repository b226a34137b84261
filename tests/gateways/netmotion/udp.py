"""What the NetworkMotionServer tests share: a clock faster than real time, and a UDP client."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable


class ScaledClock:
    """A module clock running ``rate`` times faster than the wall clock, from 0 (and from ``t`` after
    :meth:`jump`)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._origin = time.monotonic()
        self._callbacks: list[Callable[[float, float], object]] = []

    def now(self) -> float:
        return (time.monotonic() - self._origin) * self.rate

    def sleep_until(self, t: float, stop: threading.Event) -> bool:
        return stop.wait(max(0.0, (t - self.now()) / self.rate))

    def create_jump_callback(self, callback: Callable[[float, float], object]) -> None:
        self._callbacks.append(callback)

    def jump(self, t: float) -> None:
        """Go back to ``t`` (s; a new simulation run) and call the jump callbacks with (old, new)."""
        old = self.now()
        self._origin = time.monotonic() - t / self.rate
        for callback in list(self._callbacks):
            callback(old, t)


class Client:
    """A UDP client of the server: send a command, receive datagrams (text), each within ``timeout`` s; from
    ``source`` (another loopback address, 127.0.0.2, is another client host)."""

    def __init__(self, address: tuple[str, int], timeout: float = 20.0, source: str = "127.0.0.1") -> None:
        self.address = address
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((source, 0))
        self.sock.settimeout(timeout)

    def send(self, data: str | bytes) -> None:
        self.sock.sendto(data.encode() if isinstance(data, str) else data, self.address)

    def recv(self) -> str:
        data, sender = self.sock.recvfrom(65535)
        assert sender[:2] == self.address
        return data.decode("ascii")

    def ask(self, command: str | bytes) -> str:
        self.send(command)
        return self.recv()

    def until(self, last: str) -> list[str]:
        """Every datagram up to and including ``last``."""
        got = []
        while True:
            got.append(self.recv())
            if got[-1] == last:
                return got

    def nothing_more(self, wait: float = 0.3) -> bool:
        """True if no datagram arrives within ``wait`` s."""
        self.sock.settimeout(wait)
        try:
            self.sock.recvfrom(65535)
        except TimeoutError:
            return True
        finally:
            self.sock.settimeout(20.0)
        return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

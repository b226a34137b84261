"""A plain-socket client of the XML server for the tests: it writes lines and parses the lines it reads with the
standard library's parser (through defusedxml), not with the server's codec, so the tests see what any client sees.
"""

from __future__ import annotations

import socket
import time
from xml.etree.ElementTree import Element

from defusedxml.ElementTree import fromstring


class XmlClient:
    """One connection to the server.

    Args:
        address: (host, port) of the server.
        timeout: seconds any single read may wait.
        rcvbuf: size of the socket's receive buffer, bytes (small: a client that reads slowly fills it at once).
        source: the local address to connect from (another loopback address, 127.0.0.2, is another client host).
    """

    def __init__(
        self, address: tuple[str, int], timeout: float = 10.0, rcvbuf: int | None = None, source: str | None = None
    ) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source is not None:
            self.sock.bind((source, 0))
        self.sock.settimeout(timeout)
        self.sock.connect(address)
        self._buffer = b""
        self.updates: list[Element] = []
        self.hello: Element | None = None

    def __enter__(self) -> XmlClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, text: str | bytes) -> None:
        """Send a document (a newline is added to text that has none)."""
        data = text.encode() if isinstance(text, str) else text
        if isinstance(text, str) and not data.endswith(b"\n"):
            data += b"\n"
        self.sock.sendall(data)

    def line(self) -> bytes:
        """The next line from the server, without its newline; b"" when the server closed the connection."""
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                rest, self._buffer = self._buffer, b""
                return rest
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def document(self) -> Element:
        """The next document, parsed.

        Raises:
            EOFError: the server closed the connection.
        """
        line = self.line()
        if not line:
            raise EOFError("the server closed the connection")
        assert b"\r" not in line
        return fromstring(line)

    def reply(self) -> Element:
        """The next document that is not an update (updates read on the way are kept in ``updates``)."""
        while True:
            doc = self.document()
            if doc.tag == "hello":
                self.hello = doc
            elif doc.tag == "update":
                self.updates.append(doc)
            else:
                return doc

    def request(self, text: str) -> Element:
        """Send a request and return the reply to it."""
        self.send(text)
        return self.reply()

    def start(self) -> Element:
        """Read the server's hello."""
        doc = self.document()
        assert doc.tag == "hello", doc.tag
        self.hello = doc
        return doc

    def wait_updates(self, count: int, name: str | None = None, timeout: float = 30.0) -> list[Element]:
        """Read until ``count`` updates (of ``name``, if given) have arrived in all; return those of ``name``."""
        deadline = time.monotonic() + timeout

        def mine() -> list[Element]:
            return [u for u in self.updates if name is None or u.get("name") == name]

        while len(mine()) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"only {len(mine())} of {count} updates within {timeout} s")
            doc = self.document()
            if doc.tag == "update":
                self.updates.append(doc)
        return mine()

    def closed_by_server(self) -> bool:
        """Read what is left; True when the server has closed the connection."""
        try:
            while self.line():
                pass
        except ConnectionResetError:  # closed with unread data: a reset
            return True
        except TimeoutError:
            return False
        return True


def error_code(doc: Element) -> str:
    """The code of an ``<error>`` reply (failing if it is not one)."""
    assert doc.tag == "error", f"expected an error, got <{doc.tag} {doc.attrib}>"
    return str(doc.get("code"))

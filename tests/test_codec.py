"""pluto.codec.StreamDecoder: the stream side every byte decoder shares."""

from __future__ import annotations

import pytest

from pluto.codec import NEED_DATA, ConnectionClosed, StreamDecoder
from pluto.errors import LocalProtocolError


class Lines(StreamDecoder[bytes]):
    """Lines ending in LF; a line of more than 8 bytes is skipped as garbage."""

    def _process(self) -> None:
        buffer = self._buffer
        while (end := buffer.find(b"\n")) >= 0:
            if end > 8:
                self._garbage += end + 1
            else:
                self._events.append(bytes(buffer[:end]))
            del buffer[: end + 1]


@pytest.mark.parametrize("chunk", [1, 3, 100])
def test_events_in_any_chunking_and_the_end_of_the_stream(chunk: int) -> None:
    data = b"ab\nmuch too long\ncd\nhalf"
    decoder = Lines()
    for i in range(0, len(data), chunk):
        decoder.receive_data(data[i : i + chunk])
    assert list(decoder.events()) == [b"ab", b"cd"]
    assert decoder.next_event() is NEED_DATA
    assert decoder.buffered_bytes == 4
    decoder.receive_data(b"")
    assert list(decoder.events()) == [ConnectionClosed(truncated=4)]
    assert decoder.next_event() == ConnectionClosed(truncated=4)  # again and again
    assert decoder.buffered_bytes == 0
    assert decoder.bytes_received == len(data) and decoder.garbage_bytes == len(b"much too long\n") + 4
    decoder.receive_data(b"")  # ending twice is harmless
    with pytest.raises(LocalProtocolError, match="after the end"):
        decoder.receive_data(b"x")

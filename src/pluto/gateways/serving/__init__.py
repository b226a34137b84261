"""Running a gateway's network server: an asyncio server on a loop of its own on a thread, or in the caller's loop.

On a thread of its own (what module shells do)::

    runner = ServerRunner(StreamListener(handle, "127.0.0.1", 0), name="xmlserver")
    runner.start()                  # returns once it listens
    host, port = runner.address     # the bound address (the real port when 0 was asked for)
    runner.call_soon(work, value)   # from any thread: work(value) runs on the server's loop
    runner.close()                  # from any thread, as often as you like: stops listening, closes every
                                    # connection, and ends the thread (waiting close_timeout s at most)

In the caller's asyncio loop::

    async with ServerRunner(DatagramListener(Echo, "127.0.0.1", 0), name="echo") as runner:
        ...                         # it serves while the block runs; every connection is closed at its end
    await ServerRunner(...).serve() # serves until close() (from any thread) or until the task is cancelled

A listener says what is served: TCP connections handled by a coroutine (:class:`StreamListener`, the
``asyncio.start_server`` way), TCP connections handled by an ``asyncio.Protocol`` (:class:`ProtocolListener`, the
``loop.create_server`` way) or UDP datagrams handled by an ``asyncio.DatagramProtocol`` (:class:`DatagramListener`,
``loop.create_datagram_endpoint``).

Nothing raised on the server's loop is lost: an exception of a connection's handler or protocol, of a datagram
protocol, of a task started with :meth:`ServerRunner.spawn`, of a call handed over with
:meth:`ServerRunner.call_soon`, or one the loop reports itself (on a loop of the runner's own), is counted in
:attr:`ServerRunner.errors` and logged: the first few with their traceback, then one line every few seconds with the
number held back. A TCP connection whose protocol raised is closed; a UDP endpoint goes on with the next datagram.

The package holds three ideas: :mod:`.runner` (the runner and the :class:`Listener` interface), :mod:`.tcp` (the
TCP listeners) and :mod:`.udp` (the UDP listener); every name is importable from here.
"""

from pluto.gateways.serving.runner import ERROR_LOG_INTERVAL, LOGGED_ERRORS, Address, Listener, ServerRunner
from pluto.gateways.serving.tcp import ProtocolListener, StreamHandler, StreamListener
from pluto.gateways.serving.udp import DatagramListener

__all__ = [
    "ERROR_LOG_INTERVAL",
    "LOGGED_ERRORS",
    "Address",
    "DatagramListener",
    "Listener",
    "ProtocolListener",
    "ServerRunner",
    "StreamHandler",
    "StreamListener",
]

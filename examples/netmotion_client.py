"""A NetworkMotionServer client: ping the server, read the gripper's pose, move it to a point, wave.

Start the server first (``pluto netmotion``), then run ``python examples/netmotion_client.py [host] [port]
[timeout]``, the timeout in seconds for each reply (30 by default: the first IKP may take a few seconds while the
server prepares its solver).
Any language with UDP sockets can do the same: one command per datagram, one reply per datagram.
"""

from __future__ import annotations

import socket
import sys


def main(host: str = "127.0.0.1", port: int = 15000, timeout: float = 30.0) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)

        def ask(command: str) -> str:
            sock.sendto(command.encode("ascii"), (host, port))
            return sock.recv(4096).decode("ascii")

        def run(command: str) -> None:
            """Send a motion command and wait for its end (the replies go only to us)."""
            reply = ask(command)
            print(f"{command!r} -> {reply.strip()}")
            if not reply.startswith("MOTMANREG"):
                return
            motion = reply.split()[1]
            while True:
                event = sock.recv(4096).decode("ascii").strip()
                print("  ", event)
                if event == f"MOTMANRESP {motion} DEACTIVATE":
                    break

        print(ask("PING").strip())
        print(ask("FK 7"), end="")  # the gripper frame: rotation, and the translation in mm
        run("IKP 7 180 40 120")  # the gripper to (180, 40, 120) mm
        print(ask("JOINTS").strip())  # joint values, rad (the gripper in mm)
        run("RUNMS wave.mot")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        args[0] if len(args) > 0 else "127.0.0.1",
        int(args[1]) if len(args) > 1 else 15000,
        float(args[2]) if len(args) > 2 else 30.0,
    )

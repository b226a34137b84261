"""Drive the robot through the Player gateway: 1 m forward, a quarter turn left, with the laser watching ahead.

Start the simulated robot and the gateway first, in two terminals (or on the real robot, the base and `pluto
player`):

    pluto sim --world office
    pluto player --use-sim-time

then run ``python examples/player_drive.py [--port 6665]``. Any Player 1.5 client (libplayerc, the Java or Tcl
clients) can do the same; this one is ``pluto.player.client.PlayerClient``.
"""

from __future__ import annotations

import argparse
import math

from pluto.player.client import PlayerClient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6665)
    args = parser.parse_args()

    with PlayerClient(args.host, args.port) as robot:
        robot.subscribe("position", access="a")  # read odometry, send commands
        robot.subscribe("laser")
        robot.read()
        print(f"connected to {robot.banner}; the robot is {robot.geometry().size[0]:.2f} m wide")

        start_x, start_y = robot.position.px, robot.position.py
        robot.set_speed(0.3, 0.0)  # m/s, rad/s: the server keeps it until the next command
        while math.hypot(robot.position.px - start_x, robot.position.py - start_y) < 1.0:
            robot.read()
            ahead = robot.laser.ranges[len(robot.laser.ranges) // 2] if robot.laser.ranges else math.inf
            if ahead < 0.8:
                print(f"something {ahead:.2f} m ahead: stopping early")
                break

        heading = robot.position.pa
        robot.set_speed(0.0, 0.4)
        while abs(math.remainder(robot.position.pa - heading, 2 * math.pi)) < math.radians(88):
            robot.read()
        robot.set_speed(0.0, 0.0)
        robot.read()
        p = robot.position
        print(f"odometry: x {p.px:.3f} m, y {p.py:.3f} m, heading {math.degrees(p.pa):.0f} deg")
    # closing the connection also stops the robot: it was the last client with write access


if __name__ == "__main__":
    main()

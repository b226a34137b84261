"""A fleet across sites: what a router thins on the links that leave a site.

Robots on separate sites meet through Zenoh routers, one per site, linked to each other (``pluto router --connect``);
a fleet viewer joins any of them. A robot's own modules need every scan at its full rate, but a view on another
site does not, and the link between sites (a radio, a VPN over the internet) is the scarce resource. So a site
router thins, on the network interfaces named with ``--thin`` (the link towards the other sites or the viewers), the
interfaces that carry the most bytes: laser scans to 1 Hz, the sonar ring and the inertial unit to 2 Hz, poses and
odometry to 5 Hz. Commands, statuses, service calls and their replies, liveliness and the clock pass untouched, so a
viewer across the link still drives a robot and reads every status change.

Strategy: Zenoh's own downsampling interceptor (the router's ``downsampling`` configuration), egress on the named
interfaces, for ``put`` messages only. Its rate state is per rule, shared by every key a rule's key expression
matches, so a wildcard over the robot's name would let one robot's scans use the whole budget of another's: one
rule per robot and interface, for the robots named with ``--robot`` (a site's router knows its site's robots).
"""

from __future__ import annotations

from typing import Any

from pluto import names

__all__ = ["THIN_RATES", "thinning_config"]

THIN_RATES: dict[str, float] = {
    "Sick/Scan": 1.0,
    "Sick/Scan_mm": 1.0,
    "Sick/Rear/Scan_mm": 1.0,
    "Sick/Timing": 1.0,
    "Base/Sonar": 2.0,
    "DMU/Raw": 2.0,
    "DMU/State": 2.0,
    "Wrist/State": 2.0,
    "Base/Drive/State": 5.0,
    "Localization/Dead-Reckoning": 5.0,
    "Localization/Laser_Dead-Reckoning": 5.0,
    "Localization/Pose": 5.0,
    "Localization/Laser_Pose": 5.0,
    "Sim/Truth": 5.0,
}
"""Hz at most, per robot, of each thinned interface on a thinned link."""


def thinning_config(interfaces: list[str], robots: list[str]) -> list[dict[str, Any]]:
    """The router's ``downsampling`` entries: :data:`THIN_RATES` for each robot, on what leaves by ``interfaces``.

    Args:
        interfaces: network interfaces of the router (``eth1``, ``wg0``) whose outgoing data is thinned.
        robots: robot names whose interfaces are thinned.

    Raises:
        ValueError: no interface, or no robot, or a name that cannot be part of a key.
    """
    if not interfaces:
        raise ValueError("thinning needs the network interfaces it applies to (--thin IFACE)")
    if not robots:
        raise ValueError("thinning needs the robots whose data it thins (--thin-robot NAME, repeatable)")
    for robot in robots:
        if not robot or any(c in robot for c in "/*$?#@ "):
            raise ValueError(f"robot name {robot!r}: a robot name may not be empty or contain / * $ ? # @ or spaces")
    for name in THIN_RATES:
        names.check_name(name)
    rules = [
        {"key_expr": f"pluto/{robot}/{name}", "freq": rate} for robot in robots for name, rate in THIN_RATES.items()
    ]
    return [
        {"id": "pluto-thin", "interfaces": list(interfaces), "flows": ["egress"], "messages": ["put"], "rules": rules}
    ]

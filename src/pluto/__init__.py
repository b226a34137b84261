"""Pluto: a Python software stack for mobile robots.

Modules run as separate processes (or share one), find each other by name on a Zenoh bus, and talk through typed
interfaces named after the robot software it follows (docs/design.md): hardware servers at the bottom, localization in
the middle, a chain of movement modules on top.
"""

__version__ = "0.1.0"

"""The pan/tilt wrist that carries the laser (simulated here)."""

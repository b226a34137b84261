"""Pluto's emulators and drivers against real third-party peers (each skipped, saying why, when its peer is absent)."""

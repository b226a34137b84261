"""Pluto hardware modules."""

"""Pluto movement modules."""

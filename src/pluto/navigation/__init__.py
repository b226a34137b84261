"""Pluto navigation modules."""

"""Pluto record modules."""

"""Pluto sim modules."""

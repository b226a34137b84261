"""Pluto gateways modules."""

"""Scenario tests: the whole simulated stack on the bus, and the commands that run it."""

"""The SICK laser scanner (simulated here; the serial driver alongside)."""

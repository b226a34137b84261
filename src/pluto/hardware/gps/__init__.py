"""The GPS receiver (simulated here)."""

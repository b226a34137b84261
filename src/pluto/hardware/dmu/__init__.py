"""The inertial measurement unit (simulated here)."""

"""The mobile base: motors, odometry, sonar ring, bumpers, battery (simulated here; real drivers alongside)."""

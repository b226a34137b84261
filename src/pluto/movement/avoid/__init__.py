"""The avoid module: obstacle avoidance, goto and wall following."""

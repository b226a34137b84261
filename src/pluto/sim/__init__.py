"""The simulator: the world model (:mod:`pluto.sim.world_model`) and its map files (:mod:`pluto.sim.world`),
range-sensor ray casting (:mod:`pluto.sim.raycast`), and the simulated devices that stand in for the robot's
hardware."""

"""The robot arm: kinematics, motion sequences and the motion manager, servo backends, and the ``arm`` module."""

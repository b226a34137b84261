"""The NetworkMotionServer: a UDP text protocol to run motions, inverse and forward kinematics on the arm."""

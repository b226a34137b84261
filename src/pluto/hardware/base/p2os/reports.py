"""What the emulated Pioneer reports, in robot units: its standard SIP and its CONFIGpac, from the physics.

    sip = standard_sip(params, drive, body, sonar=readings, sonar_enabled=(True, True), estop=False, digout=0)
    config = config_packet(params, drive, name="Pluto", sip_cycle=0.1, host_baud=0, watchdog=2.0)

:class:`.robot.P2osRobot` sends them; :mod:`.sip` encodes them. Every value is saturated to its field, so a robot
far from its origin or a battery out of range gives a valid packet, never an exception.
"""

# Strategy: the fields follow docs/protocols/p2os.md ("The standard SIP", which lists the CONFIGpac too). The
# SIP's position is the wheels' odometry from the SETO origin, 15 bits wrapped as a Pioneer's is; its velocities are
# the wheels' own; it says stopped (0x32) from the moment the motors are off and moving (0x33) only while they are on
# and the wheels turn. The CONFIGpac gives the model's tops and the maxima and accelerations set since, with ARCOS's
# defaults for what an emulator has no hardware for.

from __future__ import annotations

import math

from pluto.hardware.base.sim import SimBody

from .models import RobotParams
from .physics import SONAR_ARRAY_SIZE, Drivetrain
from .sip import ConfigPacket, Sip, SonarReading

__all__ = ["config_packet", "standard_sip"]

_BUMPER_SWITCHES = 0x1F  # five bumper switches
_FRONT_BUMPERS = _BUMPER_SWITCHES << 9
_REAR_BUMPERS = _BUMPER_SWITCHES << 1
_STALL_BITS = 0x0101
_FLAG_MOTORS = 0x01
_FLAG_ESTOP = 0x20


def _saturate(value: float, low: int, high: int) -> int:
    return max(low, min(high, round(value)))


def _flags(motors: bool, sonar_enabled: tuple[bool, ...], estop: bool) -> int:
    """The SIP's flags: bit 0 the motors, bits 1-4 the sonar arrays firing, bit 5 the e-stop."""
    flags = _FLAG_MOTORS if motors else 0
    for index, enabled in enumerate(sonar_enabled[:4]):
        if enabled:
            flags |= 1 << (index + 1)
    if estop:
        flags |= _FLAG_ESTOP
    return flags


def standard_sip(
    params: RobotParams,
    drive: Drivetrain,
    body: SimBody,
    *,
    sonar: list[tuple[int, float]],
    sonar_enabled: tuple[bool, ...],
    estop: bool,
    digout: int,
) -> Sip:
    """The standard SIP of the robot now.

    Args:
        params: the model's parameters (the unit conversions).
        drive: the servos (odometry, heading setpoint, motors, bumper stall).
        body: the simulated body (wheel speeds, bumpers, stall, battery).
        sonar: the readings new since the last SIP, (transducer, m).
        sonar_enabled: which sonar arrays fire.
        estop: the e-stop button is engaged.
        digout: the digital outputs.

    Returns:
        The SIP, every field within its range.
    """
    x, y, theta = drive.odometry()
    left, right = params.wheel_velocities(body.odom_v, body.odom_omega)
    left = _saturate(left, -0x8000, 0x7FFF)
    right = _saturate(right, -0x8000, 0x7FFF)
    stall_bumpers = (_FRONT_BUMPERS if body.front else 0) | (_REAR_BUMPERS if body.rear else 0)
    if body.stalled or drive.bumped:
        stall_bumpers |= _STALL_BITS
    state = body.state()
    return Sip(
        # stopped (0x32) from the moment the motors are off
        moving=drive.motors_enabled and (left != 0 or right != 0),
        x=params.m_to_position(x) & 0x7FFF,
        y=params.m_to_position(y) & 0x7FFF,
        theta=params.rad_to_heading(theta),
        left_velocity=left,
        right_velocity=right,
        battery=_saturate(state.voltage * 10.0, 0, 0xFF),
        stall_bumpers=stall_bumpers,
        control=params.rad_to_heading(drive.control_heading()),
        flags=_flags(drive.motors_enabled, sonar_enabled, estop),
        compass=0,
        sonars=tuple(SonarReading(number, params.m_to_range(distance)) for number, distance in sonar),
        digout=digout,
        battery_x10=_saturate(state.voltage * 10.0, 0, 0xFFFF),
        charge_state=0,
        rot_vel=_saturate(math.degrees(body.odom_omega) * 10.0, -0x8000, 0x7FFF),
        fault_flags=0,
        lat_vel=0,
        temperature=25,
        state_of_charge=_saturate(state.charge * 100.0, 0, 100),
    )


def config_packet(
    params: RobotParams, drive: Drivetrain, *, name: str, sip_cycle: float, host_baud: int, watchdog: float
) -> ConfigPacket:
    """The CONFIGpac of the robot now.

    Args:
        params: the model's parameters.
        drive: the servos (the tops, and the maxima and accelerations set).
        name: the robot's name.
        sip_cycle: s between SIPs.
        host_baud: HOSTBAUD's code (0 for 9600 ... 4 for 115200).
        watchdog: s (0: off).

    Returns:
        The CONFIGpac, every field within its range.
    """
    top, count = drive.top, params.sonar_count
    trans_vel_max, rot_vel_max = drive.max_speeds
    trans_acc, trans_decel, rot_acc, rot_decel = drive.accelerations

    def mm(value: float) -> int:
        return _saturate(value * 1000.0, 0, 0xFFFF)

    def deg(value: float) -> int:
        return _saturate(math.degrees(value), 0, 0xFFFF)

    return ConfigPacket(
        robot_type=params.robot_class,
        subtype=params.subclass,
        serial="PLUTO-EMULATOR",
        four_mots=1 if params.subclass.split("-")[0].endswith("at") else 0,
        rot_vel_top=deg(top.rot_vel_top),
        trans_vel_top=mm(top.trans_vel_top),
        rot_acc_top=deg(top.rot_acc_top),
        trans_acc_top=mm(top.trans_acc_top),
        pwm_max=1000,
        name=name,
        sip_cycle=_saturate(sip_cycle * 1000.0, 1, 0xFF),
        host_baud=host_baud,
        aux1_baud=0,
        has_gripper=0,
        front_sonar=1 if count > 0 else 0,
        rear_sonar=1 if count > SONAR_ARRAY_SIZE else 0,
        low_battery=115,
        rev_count=_saturate(2.0 * math.pi / params.diff_conv / params.dist_conv, 0, 0xFFFF),
        watchdog=_saturate(watchdog * 1000.0, 0, 0xFFFF),
        normal_mpacs=0,
        stall_val=200,
        stall_count=100,
        joy_vel=300,
        joy_rvel=50,
        rot_vel_max=deg(rot_vel_max),
        trans_vel_max=mm(trans_vel_max),
        rot_acc=deg(rot_acc),
        rot_decel=deg(rot_decel),
        rot_kp=40,
        rot_kv=20,
        rot_ki=0,
        trans_acc=mm(trans_acc),
        trans_decel=mm(trans_decel),
        trans_kp=40,
        trans_kv=20,
        trans_ki=0,
    )

"""The localization module's shell: what it does when simulated time starts again."""

from __future__ import annotations

from pluto import msgs, names
from pluto.bus import Bus
from pluto.navigation.localization.core import LocalizationParams
from pluto.navigation.localization.module import LocalizationModule, LocalizationModuleParams
from pluto.sim.module import SimModule, SimParams
from tests.helpers import wait_until


def drive(bus: Bus, module: LocalizationModule, stamps: list[float], speed: float, now: float) -> msgs.PoseEstimate:
    """Write odometry of a robot driving along x at ``speed`` (m/s), step the module at ``now``, return the pose."""
    odometry = bus.create_publisher("Base/Drive/State", msgs.Odometry, reliable=True)  # a burst: none dropped
    pose = bus.create_reader("Localization/Pose", msgs.PoseEstimate)
    for t in stamps:
        odometry.write(msgs.Odometry(stamp=t, x=speed * t, v=speed))
    # (count the odometry: the queue also holds what the module heard besides, such as its own first Post_Pose)
    wait_until(
        lambda: module.queued.get(names.BASE_DRIVE_STATE, 0) >= len(stamps),
        message="odometry queued",
    )
    pose.read()  # what it holds now is the old value
    module.step(now)
    value = pose.wait_for_update(timeout=5)
    bus.release(odometry)
    bus.release(pose)
    return value


def test_a_clock_jump_starts_dead_reckoning_again(bus: Bus) -> None:
    params = LocalizationModuleParams(autostart=False, model=LocalizationParams(dmu_wait=0.0, wrist_wait=0.0))
    module = LocalizationModule(bus, params)
    module.start()
    try:
        before = drive(bus, module, [i * 0.1 for i in range(31)], 1.0, 3.0)
        assert abs(before.pose[0] - 3.0) < 1e-6
        module.on_clock_jump(3.0, 0.0)
        # the new run's odometry starts at 0 again: taken, not refused as older than the old run's
        after = drive(bus, module, [i * 0.1 for i in range(11)], 0.5, 1.0)
        assert abs(after.pose[0] - 0.5) < 1e-6
        assert after.stamp == 1.0
    finally:
        module.stop()


def test_start_from_sim_takes_the_worlds_start_unless_a_pose_is_given(bus: Bus) -> None:
    sim = SimModule(bus, SimParams(world="campus", rate=1.0))
    sim.start()
    no_wait = LocalizationParams(dmu_wait=0.0, wrist_wait=0.0)

    def start_of(params: LocalizationModuleParams) -> list[float]:
        module = LocalizationModule(bus, params)
        module.start()
        try:
            module.core.add_odometry(0.0, 0.0, 0.0, 0.0)  # the first sample: the start pose, whatever the odometry
            return list(module.core.pose().pose[:4])
        finally:
            module.stop()

    try:
        assert start_of(LocalizationModuleParams(autostart=False, start_from_sim=True, model=no_wait)) == [
            50.0,
            30.0,
            0.0,
            1.570796,
        ]
        given = LocalizationModuleParams(
            autostart=False, start_from_sim=True, start_pose=[1.0, 2.0, 0.5], model=no_wait
        )
        assert start_of(given) == [1.0, 2.0, 0.0, 0.5]
        assert start_of(LocalizationModuleParams(autostart=False, model=no_wait)) == [
            0.0,
            0.0,
            0.0,
            0.0,
        ]  # odometry's origin
    finally:
        sim.stop()


def test_a_post_whose_covariance_cannot_be_one_is_refused_counted_and_the_service_goes_on(bus: Bus) -> None:
    params = LocalizationModuleParams(autostart=False, model=LocalizationParams(dmu_wait=0.0, wrist_wait=0.0))
    module = LocalizationModule(bus, params)
    module.start()
    # written straight on the bus, as a program that bypasses the proxies' limits would
    post = bus.create_publisher("Localization/Post_Pose", msgs.PoseEstimate, reliable=True)
    pose = bus.create_reader("Localization/Pose", msgs.PoseEstimate)

    def posted(covariance: list[float]) -> None:
        value = msgs.PoseEstimate(pose=[10.0, 20.0, 0.0, 1.0, 0.0, 0.0], covariance=covariance, cmd_flags=-1)
        post.write(value)
        wait_until(lambda: module.queued.get("Localization/Post_Pose", 0) >= 1, message="the post queued")
        pose.read()
        module.step(3.0)

    try:
        drive(bus, module, [i * 0.1 for i in range(31)], 1.0, 3.0)
        errors = module.errors
        posted([-1.0, 0, 0, 0, 0.01, 0, 0, 0, 0.001])
        assert (module.refused_posts, module.errors) == (1, errors + 1)
        assert module.adjustment.posts == 0 and module.adjustment.setter == 0  # nothing changed, not the setter
        current = pose.read()
        assert current is not None and abs(current.pose[0] - 3.0) < 1e-6 and current.cmd_flags == 0
        [note] = module.info().notes
        assert "1 posted poses refused" in note and "posted covariance[0] = -1 is a variance" in note
        # the service goes on: a post that can be one is applied
        posted([0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.001])
        after = pose.wait_for_update(timeout=5)
        assert after.pose[:2] == [10.0, 20.0] and after.cmd_flags == -1
        assert after.covariance[0] >= 0.01 and module.refused_posts == 1
    finally:
        bus.release(post)
        bus.release(pose)
        module.stop()

"""The compressed filter against the full one: the same estimate at every full update, at the cost of the area."""

from __future__ import annotations

import time

import numpy as np
import pytest

import pluto.navigation.slam.compressed as compressed_module
from pluto.navigation.slam import AreaParams, CompressedWallEKF, WallEKF, WallObservation
from tests.navigation.slam.drive import (
    OBS_COV,
    Mapper,
    corridor_path,
    corridor_world,
    drive,
    track_path,
    track_world,
)

START_COV = np.diag([1e-4, 1e-4, 1e-5])


def _max_diff(a: CompressedWallEKF, b: WallEKF) -> tuple[float, float]:
    xa, pa = a.full_state()
    xb, pb = b.full_state()
    assert xa.shape == xb.shape and pa.shape == pb.shape
    return float(np.abs(xa - xb).max()), float(np.abs(pa - pb).max())


def test_compressed_equals_full_ekf_at_every_full_update() -> None:
    rng = np.random.default_rng(7)
    world = track_world(rng)
    path = track_path()
    full = WallEKF(path[0], START_COV)
    comp = CompressedWallEKF(path[0], START_COV, area=AreaParams(radius=10.0, switch_distance=3.0))
    a, b = Mapper(comp), Mapper(full)
    compared = 0
    worst = (0.0, 0.0)
    biggest_area = 0
    for k, scan in enumerate(drive(world, path, rng)):
        before = comp.full_updates
        a.step(scan)
        b.step(scan)
        biggest_area = max(biggest_area, comp.area_size)
        assert np.abs(comp.pose - full.pose).max() < 1e-9  # the pose is always in A
        if comp.full_updates != before or k % 50 == 49:  # an area switch (or a B wall seen), or on demand
            dx, dp = _max_diff(comp, full)
            worst = (max(worst[0], dx), max(worst[1], dp))
            compared += 1
    dx, dp = _max_diff(comp, full)
    worst = (max(worst[0], dx), max(worst[1], dp))
    assert a.index == b.index
    assert len(comp) == len(full) >= 60
    assert comp.full_updates >= 20  # many area switches on the way, and the second lap sees walls of B again
    assert compared >= 20
    assert worst[0] < 1e-9 and worst[1] < 1e-9, worst
    # the area stayed a small part of the map
    assert biggest_area < 0.5 * (3 + 2 * len(full))
    # and the map is worth having: every wall near its truth
    x, _ = full.full_state()
    for truth, index in b.index.items():
        alpha, rho = x[3 + 2 * index : 5 + 2 * index]
        assert abs(np.angle(np.exp(1j * (alpha - world.alpha[truth])))) < 0.05
        assert abs(rho - world.rho[truth]) < 0.5


def test_full_update_on_demand_changes_nothing() -> None:
    rng = np.random.default_rng(3)
    world = track_world(rng, walls=30)
    path = track_path(laps=0.3)
    comp = CompressedWallEKF(path[0], START_COV)
    mapper = Mapper(comp)
    for scan in drive(world, path, rng):
        mapper.step(scan)
    x1, p1 = comp.full_state()
    before = comp.full_updates
    comp.full_update()
    x2, p2 = comp.full_state()
    assert comp.full_updates == before  # nothing changed since, so nothing to recover
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(p1, p2)
    for index in range(len(comp)):
        np.testing.assert_allclose(comp.wall(index), x1[3 + 2 * index : 5 + 2 * index], atol=1e-12)


def test_wall_of_b_is_exact_without_a_full_update() -> None:
    rng = np.random.default_rng(11)
    world = track_world(rng, walls=40)
    path = track_path(laps=0.6)
    full = WallEKF(path[0], START_COV)
    comp = CompressedWallEKF(path[0], START_COV, area=AreaParams(radius=8.0, switch_distance=50.0))
    a, b = Mapper(comp), Mapper(full)
    for k, scan in enumerate(drive(world, path, rng)):
        a.step(scan)
        b.step(scan)
        if k == 40:
            comp.full_update()  # A becomes the walls near here; the drive then goes on, seeing new walls only
    outside = [i for i in range(len(comp)) if i not in comp.area_walls]
    assert outside
    before = comp.full_updates
    for i in outside:
        np.testing.assert_allclose(comp.wall(i), full.wall(i), atol=1e-9, rtol=0)
    assert comp.full_updates == before


def test_update_touches_only_the_area(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    world = corridor_world(90.0)
    path = corridor_path(90.0)
    comp = CompressedWallEKF(path[0], START_COV, area=AreaParams(radius=8.0, switch_distance=3.0))
    mapper = Mapper(comp)
    shapes: list[tuple[int, list[tuple[int, ...]]]] = []
    real = compressed_module.compressed_update

    def spy(*args: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
        shapes.append((comp.area_size, [a.shape for a in args]))
        return real(*args)

    monkeypatch.setattr(compressed_module, "compressed_update", spy)
    for scan in drive(world, path, rng):
        mapper.step(scan)
    whole = 3 + 2 * len(comp)
    assert len(comp) > 100 and len(shapes) > 100
    for n_a, (x_a, p_aa, phi, psi, theta, h, r, nu) in shapes:
        assert x_a == (n_a,) and p_aa == (n_a, n_a) and h[1] == n_a and r == (h[0], h[0]) and nu == (h[0],)
        assert phi[0] == n_a and psi == (phi[1], phi[1]) and theta == (phi[1],)
        assert phi[1] <= n_a < whole / 4
    # a wall added in the area appends a row block to φ: some update ran with φ taller than wide
    assert any(phi[0] > phi[1] for _, (_, _, phi, *_rest) in shapes)


def test_update_cost_follows_the_area_not_the_map() -> None:
    """Times the last updates of a long corridor for both filters (printed, never asserted)."""
    rng = np.random.default_rng(9)
    world = corridor_world(80.0)
    path = corridor_path(80.0)
    full = WallEKF(path[0], START_COV)
    comp = CompressedWallEKF(path[0], START_COV, area=AreaParams(radius=8.0, switch_distance=4.0))
    a, b = Mapper(comp), Mapper(full)
    scans = list(drive(world, path, rng))
    for scan in scans[:-20]:
        a.step(scan)
        b.step(scan)
    comp.full_update()
    timings = {}
    for name, slam in (("compressed", comp), ("full", full)):
        known = [(a.index[w], o) for s in scans[-20:] for w, o in s.seen[:2] if w in a.index]
        assert known
        t0 = time.perf_counter()
        for i in range(0, len(known) - 1, 2):
            slam.update(known[i : i + 2])
        timings[name] = (time.perf_counter() - t0) / (len(known) // 2)
    print(
        f"\nmap of {len(comp)} walls (state {3 + 2 * len(comp)}), area {comp.area_size}: per update "
        f"compressed {1e6 * timings['compressed']:.0f} µs, full {1e6 * timings['full']:.0f} µs"
    )
    assert comp.area_size < (3 + 2 * len(comp)) / 4


def test_observation_of_unknown_wall_is_refused() -> None:
    comp = CompressedWallEKF((0.0, 0.0, 0.0), START_COV)
    with pytest.raises(IndexError):
        comp.update([(0, WallObservation(0.0, 2.0, OBS_COV))])
    with pytest.raises(IndexError):
        comp.full_update([3])
    with pytest.raises(ValueError):
        AreaParams(radius=0.0)


def test_marginal_of_area_and_b_walls_equals_the_full_filter() -> None:
    rng = np.random.default_rng(13)
    world = track_world(rng, walls=40)
    path = track_path(laps=0.7)
    full = WallEKF(path[0], START_COV)
    comp = CompressedWallEKF(path[0], START_COV, area=AreaParams(radius=8.0, switch_distance=6.0))
    a, b = Mapper(comp), Mapper(full)
    for scan in drive(world, path, rng):
        a.step(scan)
        b.step(scan)
    inside = list(comp.area_walls)[:3]
    outside = [i for i in range(len(comp)) if i not in comp.area_walls][:4]
    assert len(inside) == 3 and len(outside) == 4
    before = comp.full_updates
    walls = [outside[0], inside[0], outside[1], inside[1], outside[2], outside[3], inside[2]]
    xc, pc = comp.marginal(walls)
    xf, pf = full.marginal(walls)
    assert comp.full_updates == before
    assert xc.shape == (3 + 2 * len(walls),) and pc.shape == (xc.size, xc.size)
    assert np.abs(xc - xf).max() < 1e-9 and np.abs(pc - pf).max() < 1e-9


def test_merging_two_walls_is_the_same_in_both_filters() -> None:
    rng = np.random.default_rng(17)
    world = track_world(rng, walls=30)
    path = track_path(laps=0.5)
    full = WallEKF(path[0], START_COV)
    comp = CompressedWallEKF(path[0], START_COV, area=AreaParams(radius=8.0, switch_distance=3.0))
    a, b = Mapper(comp), Mapper(full)
    for scan in drive(world, path, rng):
        a.step(scan)
        b.step(scan)
    # the first wall (long out of the area) and the last one facing the same way: a merge pulls the first into A
    keep = 0
    drop = max(i for i in range(1, len(full)) if abs(np.angle(np.exp(1j * (full.wall(i)[0] - full.wall(0)[0])))) < 1)
    assert keep not in comp.area_walls
    nis_full = full.merge(keep, drop)
    nis_comp = comp.merge(keep, drop)
    assert nis_comp == pytest.approx(nis_full, rel=1e-6)
    np.testing.assert_allclose(full.wall(keep), full.wall(drop), atol=1e-4)
    dx, dp = _max_diff(comp, full)
    assert dx < 1e-9 and dp < 1e-9
    with pytest.raises(ValueError):
        comp.merge(1, 1)
    with pytest.raises(IndexError):
        full.merge(0, len(full))

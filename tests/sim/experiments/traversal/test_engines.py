"""The RTL runs' shared parts (sim/experiments/traversal/engines.py): the rays, the t quantiles
and the steady-state throughput with its batch-means interval."""

import numpy as np
import pytest

from gpurtl.sim.experiments.traversal import engines as E


def test_the_rays_are_whole_waves_at_the_image_centre():
    mesh, _ = E.load_scene("bunny")
    o, d = E.pick_rays(mesh, 1, 70)
    assert o.shape == d.shape == (70, 3)
    o2, d2 = E.pick_rays(mesh, 1, 70)
    assert (o == o2).all() and (d == d2).all()
    # more rays than the 256x192 image: the image twice as wide and high
    o3, d3 = E.pick_rays(mesh, 1, 60_000)
    assert len(o3) == 60_000 == len(np.unique(d3, axis=0))
    # diffuse bounces: from the hits, not the camera
    _, scene = E.load_scene("bunny")
    o4, d4 = E.pick_rays(mesh, 1, 70, "diffuse", scene.top)
    assert o4.shape == d4.shape == (70, 3)
    assert not np.isclose(o4, o[0]).all(axis=1).any()


def test_t_quantiles_are_students():
    # printed tables of the two-sided 95% quantile (e.g. NIST/SEMATECH e-Handbook, 1.3.6.7.2)
    assert E.t95(2) == pytest.approx(12.706) and E.t95(10) == pytest.approx(2.262)
    assert E.t95(31) == pytest.approx(2.042) and E.t95(1000) == 1.96
    with pytest.raises(ValueError, match="`n` must be at least 2, not 1"):
        E.t95(1)
    mean, half = E.interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / np.sqrt(3))


def test_a_steady_run_has_its_rate_and_no_spread():
    """A wave of 32 rays ends every 10 cycles: 3200 rays per 1000 cycles in every batch."""
    ends = 100 + 10 * np.arange(400)
    rng = np.random.default_rng(1)
    shuffled = rng.permutation(400)  # the order of the waves does not matter, their ends do
    s = E.steady_state(ends[shuffled], np.full(400, 32))
    assert s["rays_per_kcycle"][0] == pytest.approx(3200.0)
    assert s["rays_per_kcycle"][1] == pytest.approx(0.0, abs=1e-9)
    assert len(s["batches"]) == E.BATCHES and s["waves"] == 320
    assert s["window"] == [100 + 10 * 39, 100 + 10 * 359]


def test_the_fill_and_drain_are_left_out():
    """Slow first and last tenths (the fill and drain) do not move the steady figure; a slow
    middle stretch widens the interval."""
    gaps = np.full(400, 10)
    gaps[:40] = gaps[-40:] = 100
    s = E.steady_state(np.cumsum(gaps), np.full(400, 32))
    assert s["rays_per_kcycle"][0] == pytest.approx(3200.0, rel=0.01)
    gaps[150:180] = 40
    t = E.steady_state(np.cumsum(gaps), np.full(400, 32))
    assert t["rays_per_kcycle"][0] < 3100 and t["rays_per_kcycle"][1] > 100


def test_too_few_waves_have_no_steady_state():
    assert E.steady_state(np.arange(40), np.full(40, 32)) is None

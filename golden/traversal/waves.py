"""Whole waves for the CU model from the wave-batched loop's step records."""

import numpy as np

from gpurtl.golden.cu import WaveTrace

__all__ = ["ATTR_BASE", "sample_waves", "wave_traces"]

#: VA of the per-primitive attribute data the shading loads read (64 bytes per primitive)
ATTR_BASE = 1 << 40


def sample_waves(n_rays, count, *, seed=0):
    """``count`` distinct wave indices (32 consecutive rays each) spread over the image, in a
    random launch order."""
    waves = n_rays // 32
    rng = np.random.default_rng(seed)
    pick = np.linspace(0, waves - 1, min(count, waves)).astype(np.int64)
    return rng.permutation(np.unique(pick))


def wave_traces(res, waves, *, inst_prim_base=None):
    """:class:`gpurtl.golden.cu.WaveTrace` of each wave in ``waves`` (their rays recorded)."""
    ray = res.rec_ray
    wave_of = ray // 32
    order = np.lexsort((ray % 32, res.rec_step, wave_of))
    cols = [
        wave_of[order],
        res.rec_step[order],
        ray[order] % 32,
        res.rec_va[order] >> 7,
        res.rec_kind[order],
        res.rec_box_tests[order],
        res.rec_tri_tests[order],
    ]
    by_wave = {}
    for w, step, lane, line, kind, box, tri in zip(*(c.tolist() for c in cols)):
        its = by_wave.setdefault(w, [])
        if len(its) <= step:
            its.extend([] for _ in range(step + 1 - len(its)))
        its[step].append((lane, line, kind, box, tri))
    out = []
    for w in waves.tolist():
        rays = np.arange(32 * w, 32 * w + 32)
        rays = rays[rays < len(res.prim)]
        prim = res.prim[rays]
        inst = res.inst[rays]
        base = 0 if inst_prim_base is None else inst_prim_base[np.maximum(inst, 0)]
        hits = ((ATTR_BASE + (base + prim) * 64) >> 7)[prim >= 0].tolist()
        out.append(WaveTrace(by_wave.get(w, []), hits, tag=w))
    return out

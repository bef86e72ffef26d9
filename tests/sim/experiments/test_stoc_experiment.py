"""The `stoc` experiment in quick mode: runs, writes its files, and its numbers are consistent."""

import json

import numpy as np

from gpurtl.sim import experiments
from gpurtl.sim.experiments import stoc


def test_bake_is_conservative_against_point_samples():
    # every texel hit by a point inside an opaque / transparent micro-triangle must agree
    tex = stoc.make_texture("leaves", 64)
    rng = np.random.default_rng(0)
    for level in (2, 4):
        states = stoc.bake_states(tex, stoc.CARD_UV[1], level)
        a, b = rng.random(20000), rng.random(20000)
        u, v = np.where(a + b <= 1, a, 1 - a), np.where(a + b <= 1, b, 1 - b)
        from gpurtl.golden.stoc.index import bary_to_index

        idx = bary_to_index(np.float32(u).view(np.uint32), np.float32(v).view(np.uint32), level)
        uv = (
            (1 - u - v)[:, None] * stoc.CARD_UV[1, 0]
            + u[:, None] * stoc.CARD_UV[1, 1]
            + v[:, None] * stoc.CARD_UV[1, 2]
        )
        texel = np.clip(np.floor(uv * 64).astype(int), 0, 63)
        alpha = tex[texel[:, 0], texel[:, 1]]
        assert (alpha[states[idx] == 1] == 1).all()
        assert (alpha[states[idx] == 0] == 0).all()
        assert (states == 0).any() and ((states == 1).any() or level < 4)


def test_quick_run(tmp_path):
    result = experiments.run(stoc, tmp_path, quick=True)
    for path in result["files"]:
        assert (tmp_path / path.split("/")[-1]).exists()
    data = json.loads((tmp_path / experiments.DATA).read_text())
    # the report again, from data.json alone: the same tables
    summary = (tmp_path / "summary.md").read_text()
    (tmp_path / "summary.md").unlink()
    experiments.report(stoc, tmp_path)
    assert (tmp_path / "summary.md").read_text() == summary
    res = data["results"]
    assert data["rtl"]["failed"] == 0 and data["rtl"]["passed"] > 0
    for name, r in res.items():
        if not name.startswith("OMM2"):
            assert r["shadow_diff"] == 0 and r["wrong"] == 0, name
        assert r["tests"] <= res["none"]["tests"]
    # finer micromaps never need more alpha tests; STOC3 inline = OMM level 3
    tests = [res[f"OMM {level}"]["tests"] for level in range(1, 7)]
    assert tests == sorted(tests, reverse=True)
    assert res["STOC3"]["tests"] == res["OMM 3"]["tests"]
    assert res["STOC1"]["tests"] == res["OMM 1"]["tests"]
    assert res["STOC3+SW6"]["tests"] == res["OMM 6"]["tests"]

"""The `obb` experiment in its quick form: runs, writes its files, exact and fast models agree."""

import json
import pathlib

import pytest

from gpurtl.sim import experiments
from gpurtl.sim.experiments import obb


@pytest.mark.full
def test_obb_experiment_quick(tmp_path):
    result = experiments.run(obb, tmp_path, quick=True)
    for path in result["files"]:
        assert pathlib.Path(path).exists()
    data = json.loads((tmp_path / experiments.DATA).read_text())
    agree, total = data["agree"]
    assert total > 0 and agree == total
    for name, replay in data["rtl"].items():
        assert replay["failed"] == 0 and replay["passed"] > 0, name
    results = {(r["scene"], r["config"]): r for r in data["results"]}
    base, with_obb = results["chandelier", "bvh8"], results["chandelier", "bvh8+obb"]
    # OBBs fit the rotated chain links better: fewer triangle tests on the chandelier
    assert with_obb["tri_tests"] < base["tri_tests"]

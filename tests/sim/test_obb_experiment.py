"""The `obb` experiment in its quick form: runs, writes its files, exact and fast models agree."""

import pathlib

from gpurtl.sim.experiments import obb


def test_obb_experiment_quick(tmp_path):
    result = obb.run(tmp_path, quick=True)
    for path in result["files"]:
        assert pathlib.Path(path).exists()
    agree, total = result["agree"]
    assert total > 0 and agree == total
    for name, (passed, failed) in result["rtl"].items():
        assert failed == 0 and passed > 0, name
    base = result["results"]["chandelier|bvh8"]
    with_obb = result["results"]["chandelier|bvh8+obb"]
    # OBBs fit the rotated chain links better: fewer triangle tests on the chandelier
    assert with_obb["tri_tests"] < base["tri_tests"]

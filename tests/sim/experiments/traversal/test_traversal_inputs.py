"""Your own scene, camera and rays for ``gpurtl experiment traversal`` (``--scene``, ``--camera``,
``--rays``: sim/experiments/traversal/inputs.py): runs on a small OBJ, and one line naming the
file, line and field with exit status 2 for each kind of mistake, before any work."""

import json
from pathlib import Path

import numpy as np
import pytest

from gpurtl.golden.bvh import mesh as M
from gpurtl.sim.experiments.traversal import inputs
from gpurtl.sim.tools.cli import main

DATA = Path(__file__).resolve().parents[3] / "data"
OBJ = DATA / "tetra_pair.obj"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_obj_reads_as_its_faces():
    mesh = inputs.read_scene(OBJ)
    assert len(mesh) == 10  # 8 tetrahedron faces, the quad fanned into two
    assert mesh.vertices.shape == (12, 3)
    # the quad 9 10 11 12 becomes (9, 10, 11) and (9, 11, 12), 0-based
    assert mesh.faces[-2:].tolist() == [[8, 9, 10], [8, 10, 11]]


def test_quick_run_on_your_own_obj(tmp_path, capsys):
    code, out, err = run(
        capsys, "experiment", "traversal", "--quick", "--scene", str(OBJ), "--out", str(tmp_path)
    )
    assert code == 0, err
    data = json.loads((tmp_path / "traversal" / "data.json").read_text())
    assert data["scene_names"] == ["tetra_pair.obj (10 tris)"]
    assert [sc["triangles"] for sc in data["scenes"]] == [10]
    camera = data["scenes"][0]["func"]["camera"]
    assert camera["rays"] == 128 * 96 and 0 < camera["hit_fraction"] < 1


def test_your_own_camera_and_rays(tmp_path, capsys):
    """A camera that looks away from the scene hits nothing; a ray file of 64 rays straight
    down onto the ground quad hits it at the distance worked out by hand (origin 1 above)."""
    code, _, err = run(
        capsys, "experiment", "traversal", "--quick", "--scene", str(OBJ),
        "--camera", "0,0.3,3,0,0.3,10", "--out", str(tmp_path / "away"),
    )  # fmt: skip
    assert code == 0, err
    data = json.loads((tmp_path / "away" / "traversal" / "data.json").read_text())
    assert data["scenes"][0]["func"]["camera"]["hit_fraction"] == 0.0
    xs = np.linspace(-0.5, 3.0, 64)
    rows = [f"{x} 0.99 1.5 0 -1 0 5" for x in xs]
    (tmp_path / "rays.txt").write_text("# ox oy oz dx dy dz tmax\n" + "\n".join(rows) + "\n")
    code, _, err = run(
        capsys, "experiment", "traversal", "--quick", "--scene", str(OBJ),
        "--rays", str(tmp_path / "rays.txt"), "--out", str(tmp_path / "rays"),
    )  # fmt: skip
    assert code == 0, err
    data = json.loads((tmp_path / "rays" / "traversal" / "data.json").read_text())
    func = data["scenes"][0]["func"]["camera"]
    assert func["rays"] == 64 and func["hit_fraction"] == 1.0
    o, d, tmax = inputs.read_rays(tmp_path / "rays.txt")
    assert np.allclose(o[:, 1], 0.99) and np.allclose(d, [0, -1, 0]) and np.all(tmax == 5)


@pytest.mark.parametrize(
    "content, argv, message",
    [
        ("v 0 0 0\nv 1 0 0\nf 1 2 3\n", (), "line 3: field 3 of the face must name one of the 2"),
        ("v 0 zero 0\n", (), "line 1: field y must be a number, not 'zero'"),
        ("v 0 0\n", (), "line 1: a vertex needs x y z"),
        ("# nothing\n", (), "no triangles"),
        (None, ("--camera", "0,0,1,0,0"), "--camera must be 6, 9 or 10 comma-separated numbers"),
        (None, ("--camera", "0,0,1,0,0,x"), "--camera: field 6 (target z) must be a number"),
        (None, ("--camera", "0,0,1,0,0,1"), "--camera: the target must differ from the eye"),
        (None, ("--camera", "0,0,0,0,0,1,0,1,0,200"), "field 10 (field of view) must be 1 to 170"),
        (None, ("--rays", "RAYS:1 2 3 0 0 1\n"), "line 1: a ray must be 7 numbers"),
        (None, ("--rays", "RAYS:1 2 3 0 0 0 1\n"), "line 1: fields 4-6 (direction) must not"),
        (None, ("--rays", "RAYS:1 2 3 0 0 1 -1\n"), "line 1: field 7 (tmax) must be a positive"),
        (None, ("--rays", "RAYS:1 2 3 0 0 1 1\n"), "1 rays; the run needs at least 32"),
        (None, ("--rays", "RAYS:1 2 3 0 0 1 1\n", "--camera", "0,0,1,0,0,0"), "two sources"),
    ],
)
def test_mistakes_are_one_line_exit_2(tmp_path, capsys, content, argv, message):
    scene = tmp_path / "scene.obj"
    scene.write_text(content if content is not None else OBJ.read_text())
    args = []
    for a in argv:
        if a.startswith("RAYS:"):
            (tmp_path / "rays.txt").write_text(a[5:])
            a = str(tmp_path / "rays.txt")
        args.append(a)
    out_dir = tmp_path / "out"
    code, out, err = run(
        capsys, "experiment", "traversal", "--quick", "--scene", str(scene), *args,
        "--out", str(out_dir),
    )  # fmt: skip
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert "Traceback" not in err and not out_dir.exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (("--scene", "no/such.obj"), "--scene: no/such.obj: no such file"),
        (("--camera", "0,0,1,0,0,0"), "--camera is an option of --scene"),
        (("--scene", str(OBJ), "--rtl"), "--scene is an option of the default run"),
    ],
)
def test_option_mistakes_are_one_line_exit_2(tmp_path, capsys, argv, message):
    code, out, err = run(
        capsys, "experiment", "traversal", "--quick", *argv, "--out", str(tmp_path / "o")
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


def test_a_ply_scene_reads_as_the_obj(tmp_path):
    mesh = inputs.read_scene(OBJ)
    M.save_ply(mesh, tmp_path / "scene.ply")
    again = inputs.read_scene(tmp_path / "scene.ply")
    assert np.array_equal(again.vertices, mesh.vertices) and np.array_equal(again.faces, mesh.faces)
    (tmp_path / "bad.ply").write_bytes(b"ply\nformat ascii 1.0\nend_header\n")
    with pytest.raises(ValueError, match="bad.ply: "):
        inputs.read_scene(tmp_path / "bad.ply")

"""The fast backend's build cache (sim/backends/fast/build.py): a finished build moved into its
folder when two processes built the same model at once."""

from gpurtl.sim.backends.fast import build


def _build(path, text):
    (path / "obj").mkdir(parents=True)
    (path / "obj" / "sim_top").write_text(text)
    return path


def test_a_new_build_is_moved_in(tmp_path):
    scratch = _build(tmp_path / "b.1.partial", "one")
    build._install(scratch, tmp_path / "b", "sim_top")
    assert (tmp_path / "b" / "obj" / "sim_top").read_text() == "one" and not scratch.exists()


def test_the_first_finished_build_stays(tmp_path):
    """Another process may be running the first one's executable: the second is dropped."""
    _build(tmp_path / "b", "first")
    scratch = _build(tmp_path / "b.2.partial", "second")
    build._install(scratch, tmp_path / "b", "sim_top")
    assert (tmp_path / "b" / "obj" / "sim_top").read_text() == "first" and not scratch.exists()


def test_a_folder_without_its_executable_is_replaced(tmp_path):
    (tmp_path / "b" / "obj").mkdir(parents=True)
    (tmp_path / "b" / "build.log").write_text("stopped half way")
    scratch = _build(tmp_path / "b.3.partial", "new")
    build._install(scratch, tmp_path / "b", "sim_top")
    assert (tmp_path / "b" / "obj" / "sim_top").read_text() == "new"
    assert not (tmp_path / "b" / "build.log").exists()

"""Every package folder under facts/, hdl/, golden/ and sim/ is listed in pyproject.toml."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for top in ("facts", "hdl", "golden", "sim"):
        for init in (ROOT / top).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT)
            found.add("gpurtl." + ".".join(relative.parts))
    assert found - listed == set(), "add these packages to pyproject.toml"
    assert listed - found == set(), "these listed packages do not exist"

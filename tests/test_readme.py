"""The README's block table lists every registered block, and the FP32 page says that its Fmax
figures vary between runs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_block_table_lists_every_block():
    from gpurtl.sim.core import registry

    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Blocks", 1)[1].split("\n## ", 1)[0]
    missing = [b.name for b in registry.blocks() if f"`{b.name}`" not in table]
    assert not missing


def test_fp32_fmax_table_says_it_varies():
    page = (ROOT / "docs" / "fp32.md").read_text()
    section = page.split("## Resources and Fmax", 1)[1].split("\n## ", 1)[0]
    assert "vary by a few percent between runs" in " ".join(section.split())

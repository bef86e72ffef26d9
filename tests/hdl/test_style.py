"""Rules of the RTL's shape that review alone keeps forgetting, checked on the source of
``hdl/``: no ``elaborate`` longer than :data:`MAX_ELABORATE_LINES` (split it by stage or by
path), the clock-enable signature spelled only where it is defined
(:class:`gpurtl.hdl.pipe.EnableCoreSignature`), and the binary32 bit patterns named in
:mod:`gpurtl.facts.fp32` rather than written out."""

import ast
import re
from pathlib import Path

import pytest

import gpurtl.hdl

MAX_ELABORATE_LINES = 120
HDL = Path(gpurtl.hdl.__file__).resolve().parent
SOURCES = sorted(HDL.rglob("*.py"))

#: Bit patterns of :mod:`gpurtl.facts.fp32` (upper-case hex as the code base writes them).
_FP32_PATTERNS = re.compile(r"0x(7F800000|FF800000|7FC00000|3F800000|00800000)\b")


def _functions(path, name):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            yield node


def long_elaborates(sources, limit=MAX_ELABORATE_LINES):
    """``(path, line, length)`` of every ``elaborate`` longer than ``limit`` lines."""
    out = []
    for path in sources:
        for node in _functions(path, "elaborate"):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                out.append((path.name, node.lineno, length))
    return out


def test_sources_found():
    assert len(SOURCES) > 30
    assert any(path.name == "pipe.py" for path in SOURCES)


def test_no_elaborate_is_longer_than_the_limit():
    assert long_elaborates(SOURCES) == []


def test_a_long_elaborate_is_found(tmp_path):
    body = "\n".join(f"        x{k} = {k}" for k in range(MAX_ELABORATE_LINES))
    path = tmp_path / "long.py"
    path.write_text(f"class A:\n    def elaborate(self, platform):\n{body}\n")
    found = [(line, length) for _, line, length in long_elaborates([path], limit=5)]
    assert found == [(2, MAX_ELABORATE_LINES + 1)]


@pytest.mark.parametrize("path", [p for p in SOURCES if p.name != "pipe.py"], ids=lambda p: p.name)
def test_clock_enable_signature_is_named(path):
    text = path.read_text()
    allowed = path.name == "common.py" and path.parent.name == "fp32"  # FPCore adds `en`
    if not allowed:
        assert '"en": In(1)' not in text, "use pipe.EnableCoreSignature"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_binary32_patterns_are_named(path):
    found = _FP32_PATTERNS.findall(path.read_text())
    assert found == [], f"name these from gpurtl.facts.fp32: {found}"

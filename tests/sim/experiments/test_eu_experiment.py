"""The eu-issue experiment: the seed article's shapes on a few of its programs, and the whole
quick run with its report."""

import json
from importlib import metadata

import pytest

from gpurtl.facts.eu import SEED, ExecSize, MathFn, Op, Type
from gpurtl.golden.eu import PARAM_DEFAULTS
from gpurtl.sim import experiments
from gpurtl.sim.experiments import eu_issue

BASE = dict(PARAM_DEFAULTS, depth=32)


def rate(program, **params):
    return eu_issue._rate(program, 128, dict(BASE, **params))["rate"]


def test_dual_issue_gain_comes_from_the_read_port():
    f = rate(eu_issue._rate_program(Op.ADD, ExecSize.SIMD8, Type.F, 4))
    d = rate(eu_issue._rate_program(Op.ADD, ExecSize.SIMD8, Type.D, 4))
    wide = rate(eu_issue._rate_program(Op.ADD, ExecSize.SIMD8, Type.F, 4), read_bytes=512)
    assert f / d == pytest.approx(SEED["dual_issue_gain"].value, rel=0.03)
    assert wide / d == pytest.approx(2.0, rel=0.03)


def test_same_register_penalty_only_under_dual_issue():
    f1 = rate(eu_issue._rate_program(Op.ADD, ExecSize.SIMD8, Type.F, 1))
    f4 = rate(eu_issue._rate_program(Op.ADD, ExecSize.SIMD8, Type.F, 4))
    d1 = rate(eu_issue._rate_program(Op.ADD, ExecSize.SIMD8, Type.D, 1))
    d4 = rate(eu_issue._rate_program(Op.ADD, ExecSize.SIMD8, Type.D, 4))
    assert 1.8 < f4 / f1 < 2.2
    assert d4 / d1 == pytest.approx(1.0, abs=0.01)


def test_noddchk_forces_single_issue():
    n = rate(eu_issue._rate_program(Op.ADD, ExecSize.SIMD8, Type.F, 4, noddchk=1))
    d = rate(eu_issue._rate_program(Op.ADD, ExecSize.SIMD8, Type.D, 4))
    assert n == pytest.approx(d, rel=0.01)


def test_math_rates():
    sqrt = rate(eu_issue._math_program(MathFn.SQRT, ExecSize.SIMD8))
    pow_ = rate(eu_issue._math_program(MathFn.POW, ExecSize.SIMD8))
    idiv = rate(eu_issue._math_program(MathFn.IDIV_Q, ExecSize.SIMD8))
    assert pow_ / sqrt == pytest.approx(0.5, rel=0.02)
    assert idiv / sqrt == pytest.approx(1 / 16, rel=0.05)


@pytest.mark.slow
def test_quick_run_and_report(tmp_path):
    module = experiments.get("eu-issue")
    result = experiments.run(module, tmp_path, quick=True)
    data = json.loads((tmp_path / "data.json").read_text())
    prov = data["provenance"]
    assert prov["gpurtl"] == metadata.version("gpurtl") and prov["commit"]
    assert prov["seeds"] == eu_issue.SEEDS == {} and prov["tools"]["amaranth"]
    assert all(row["agree"] for row in data["rtl"]) and data["rtl"]
    assert eu_issue.hide_count(data["latency"], "hit") == 6
    assert eu_issue.hide_count(data["latency"], "miss") == 11
    assert (tmp_path / "eu_issue.png").stat().st_size > 10_000
    assert any("dual-issue gain" in what for what, _ in result["rows"])

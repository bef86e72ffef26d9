"""The ``memory-hints`` experiment: NT on the streaming shading loads raises the node hit rate
of the L0 over the plain LRU baseline; a deliberately wrong policy (NT updating the LRU order as
RT does) gives the baseline's numbers again, so the experiment tells the policies apart; the
report writes its table, plot and provenance."""

import json
from importlib import metadata

import pytest

from gpurtl.facts.memory_hints import TH
from gpurtl.golden.memory import HintPolicy
from gpurtl.sim import experiments
from gpurtl.sim.experiments import memory_hints as E

CONFIGS = (
    ("baseline", TH.RT, TH.RT, HintPolicy()),
    ("nt-stream", TH.RT, TH.NT, HintPolicy()),
    ("nt-touch", TH.RT, TH.NT, HintPolicy(nt_hit="touch", nt_fill="mru")),
)


@pytest.fixture(scope="module")
def data():
    return E.measure(quick=True, seeds=2, waves=40, configs=CONFIGS)


def by_config(data):
    out = {}
    for run in data["runs"]:
        out.setdefault(run["config"], []).append(run)
    return out


def test_nt_streaming_keeps_nodes_in_the_l0(data):
    runs = by_config(data)
    for base, nt in zip(runs["baseline"], runs["nt-stream"]):
        assert base["seed"] == nt["seed"]
        assert nt["node_L0"] > base["node_L0"] + 0.005, (base, nt)
        # the streaming data themselves gain nothing from being kept
        assert nt["shade_L0"] <= base["shade_L0"] + 0.05


def test_a_wrong_nt_policy_changes_the_result(data):
    """NT updating the LRU order (hits and fills as RT) is the baseline again, and differs from
    the stated policy on every seed."""
    runs = by_config(data)
    for base, nt, wrong in zip(runs["baseline"], runs["nt-stream"], runs["nt-touch"]):
        assert wrong["node_L0"] == base["node_L0"] and wrong["cycles"] == base["cycles"]
        assert wrong["node_L0"] != nt["node_L0"]


def test_the_report_has_its_table_plot_and_provenance(data, tmp_path):
    module = experiments.get("memory-hints")
    assert module is E
    record = experiments.run_provenance(E)  # what `experiments.run` adds to the data
    (tmp_path / "data.json").write_text(experiments.dumps({**data, experiments.PROVENANCE: record}))
    result = experiments.report(E, tmp_path)
    names = {p.rsplit("/", 1)[-1] for p in result["files"]}
    assert {"memory_hints.csv", "memory_hints.png", "summary.md", "data.json"} <= names
    summary = (tmp_path / "summary.md").read_text()
    assert "nt-stream" in summary and "[" in summary  # medians and the intervals
    saved = json.loads((tmp_path / "data.json").read_text())
    assert saved["seeds"] == [0, 1] and saved["waves_per_seed"] == 40
    prov = saved["provenance"]
    assert prov == record and prov["gpurtl"] == metadata.version("gpurtl") and prov["commit"]
    assert prov["seeds"] == E.SEEDS and prov["tools"]["numpy"]
    assert "## Provenance" in summary and "sampled waves and launch order" in summary
    rows = E.summarize(saved)
    assert [r["config"] for r in rows] == ["baseline", "nt-stream", "nt-touch"]
    assert rows[0]["node_L0_diff"] == 0


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="`--seeds` must be a positive integer"):
        E.check_options({"seeds": 0})

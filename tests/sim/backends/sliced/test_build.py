"""The sliced backend's builds: the target the compiler is asked for, one executable per
generated source (a second request finds it, another graph builds another), and the model's
facts."""

import pytest

from gpurtl.sim.backends.sliced import build
from gpurtl.sim.core import registry

from ...toy import toy_block


@pytest.mark.verilator  # asks the C++ compiler
def test_the_target_words_follow_the_vector_extensions():
    flags, words = build.target()
    macros = build.target_macros(flags)
    expected = 8 if "__AVX512F__" in macros else 4 if "__AVX2__" in macros else 2
    assert words == expected


@pytest.mark.verilator
def test_a_model_is_built_once_per_source(tmp_path, monkeypatch):
    monkeypatch.setenv("GPURTL_CACHE", str(tmp_path))
    block = toy_block()
    params = block.resolve({"stages": "2"})
    first = build.model(block, params)
    again = build.model(block, params)
    assert not first.cached and again.cached and again.executable == first.executable
    assert first.synthesis_seconds > 0 and again.synthesis_seconds == 0.0
    assert (first.latency, first.ii, first.in_width, first.out_width) == (2, 1, 48, 41)

    def corrupt(graph):
        ands = list(graph.ands)
        ands[0] = (ands[0][0] ^ 1, ands[0][1])
        return graph.replace(ands=ands)

    other = build.model(block, params, graph_filter=corrupt)
    assert not other.cached and other.executable != first.executable
    narrow = build.model(block, params, words=1)
    assert narrow.lanes == 64 and narrow.executable != first.executable


def test_a_cycle_block_is_not_built():
    with pytest.raises(ValueError, match="builds pipeline blocks, not 'cycle' blocks"):
        build.model(registry.get("waitcnt"), registry.get("waitcnt").resolve())

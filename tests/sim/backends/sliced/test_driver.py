"""The generated C++ of the sliced backend, without compiling it: the order of the gates, the
values kept local, and the arguments it refuses (the compiled driver is tested end to end in
``test_sliced.py``)."""

import re

import pytest

from gpurtl.sim.backends.sliced import driver
from gpurtl.sim.backends.sliced.netlist import Aig


def _chain(length):
    """Inputs x (node 1) and y (node 2); gate k ANDs the previous gate (or x) with y, y inverted
    on odd k; one latch loads the last gate; the output reads the middle gate."""
    ands, previous = [], 2
    for k in range(length):
        ands.append((previous, 4 | (k & 1)))
        previous = 2 * (3 + 1 + k)  # node of gate k: 1 constant + 2 inputs + 1 latch + k
    return Aig(
        "chain",
        [("i__payload", 0), ("i__payload", 1)],
        {"o__payload": [2 * (4 + length // 2)]},
        [(previous, 0)],
        ands,
    )


def test_depth_first_is_topological_and_complete():
    graph = _chain(50)
    order = driver.depth_first(graph)
    assert sorted(order) == list(range(50))
    position = {graph.first_and + k: p for p, k in enumerate(order)}
    for k in order:
        for lit in graph.ands[k]:
            if lit >> 1 >= graph.first_and:
                assert position[lit >> 1] < position[graph.first_and + k]


def test_values_read_across_functions_are_stored(monkeypatch):
    monkeypatch.setattr(driver, "GATES_PER_FUNCTION", 10)
    graph = _chain(30)
    functions = driver._functions(graph)
    assert len(functions) == 3
    stored = {int(n) for _, text in functions for n in re.findall(r"v\[(\d+)\] = t", text)}
    # the last gate of each function feeds the next one; the output and latch read two more
    last = {graph.first_and + 9, graph.first_and + 19, graph.first_and + 29}
    output = graph.outputs["o__payload"][0] >> 1
    assert stored == last | {output}


@pytest.mark.parametrize(
    "options, message",
    [
        ({"words": 3}, "`words` must be one of 1, 2, 4, 8, 16, not 3"),
        ({"ring": 12}, "power of two"),
    ],
)
def test_bad_arguments_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        driver.driver_source(_chain(4), 2, 1, **{"words": 8, **options})


def test_ring_and_window_sizes():
    assert [driver.ring_size(latency) for latency in (None, 1, 9, 24)] == [16, 16, 32, 64]
    assert [driver.window_size(latency, 512) for latency in (None, 9, 24, 123)] == [
        8192,
        16384,
        32768,
        131072,
    ]


def _latches(specs):
    """One input (node 1) and latches 0..n-1 (nodes 2..); ``specs[k]`` is latch k's next-state
    node and enable node (1: the input, 2 + j: latch j)."""
    latches = [(2 * d, 0) for d, _ in specs]
    enables = [2 * e if e is not None else 1 for _, e in specs]
    return Aig("latches", [("i__payload", 0)], {"o__payload": [4]}, latches, [], (), enables)


def test_latches_update_in_place_readers_first():
    # a shift register 0 <- input, 1 <- 0, 2 <- 1, each enabled by latch 3 (which loads itself)
    graph = _latches([(1, 5), (2, 5), (3, 5), (5, None)])
    in_place, held = driver.latch_order(graph)
    assert held == []
    position = {k: p for p, k in enumerate(in_place)}
    assert position[2] < position[1] < position[0] and position[0] < position[3]
    # a swap of two latches is a loop: both go through temporaries, and the one reading them
    # (2 <- 0) still goes first
    graph = _latches([(3, None), (2, None), (2, None)])
    in_place, held = driver.latch_order(graph)
    assert (in_place, sorted(held)) == ([2], [0, 1])
    (_, text), *_ = driver._latch_functions(graph)[0]
    lines = [line.strip() for line in text.splitlines()[1:-1]]
    assert lines == ["t[0] = v[3];", "t[1] = v[2];", "v[4] = v[2];", "v[2] = t[0];", "v[3] = t[1];"]

"""The C++ of the sliced backend: a levelised and-inverter graph as bit-sliced code, inside a
batch driver.

``sliced_driver.cpp`` (package data beside this module) is a template whose ``@NAME@`` fields
are filled per design by :func:`driver_source`. Every signal of the design is a word ``W`` of
``64 * words`` bits (GCC's vector extensions, so the compiler uses AVX2 or AVX-512 registers
where it targets them and plain 64-bit operations otherwise), one bit per lane; every lane is
an independent copy of the block with its own transactions and its own random valid/ready stalls.
One clock cycle evaluates every AND gate once for all lanes at once, then loads the latches.
The gates are emitted in depth-first order from the outputs and latches (:func:`depth_first`),
in functions of :data:`GATES_PER_FUNCTION` gates: a value read only inside its own function is a
local variable, which the compiler keeps in a register or a reused stack slot, and only the
others are stored in the node array. On ``fp32_div`` (14,353 gates) this took the driver's
user time for 10^6 transactions from 0.16 s (every gate stored, levelised order) to 0.07 s, and
the compile time from 24 s to 5 s.

Between the lanes' transactions (rows of 32-bit words) and the bit slices the driver moves eight
bits of 64 lanes at a time with two 8 x 8 transposes (bytes across words, bits inside a word);
only the lanes whose offer or output changes touch their own bytes.

The driver (``sim IN OUT COUNT SEED P_VALID P_READY FREE_RUN LATENCY II MAX_IDLE``) reads
``COUNT`` rows from ``IN``; a lane that is free to offer takes the next transaction no lane has
taken yet (so rows are read in order, and the records written near each other), and keeps the
ones it has in flight in order. It writes one record per transaction, in transaction order, to
``OUT``: the output payload words, then the accept and emit cycles as two 64-bit numbers (the
fast backend's record, :mod:`gpurtl.sim.backends.fast.driver`). The first ``FREE_RUN``
transactions run with no stalls (the first ``FREE_RUN / 8`` lanes offer while one of them is
left to give, each about eight back to back, and every lane takes every output until the last of
them came out); each must take exactly ``LATENCY`` cycles, and each after the first in its lane
must be accepted ``II`` cycles after the lane's one before.
Its last line on stdout is a JSON summary; ``cycles`` there counts lane-cycles (clock cycles
times the lanes that ran transactions), comparable with the cycles of one-stimulus simulators.
Stall probabilities are rounded to multiples of 1/256.
"""

from pathlib import Path

__all__ = [
    "DRIVER_VERSION",
    "GATES_PER_FUNCTION",
    "depth_first",
    "driver_source",
    "literal",
    "ring_size",
    "window_size",
]

#: Bumped when the driver's protocol changes (the source itself keys the build cache).
DRIVER_VERSION = 5

#: AND gates per generated C++ function (keeps each function small enough to compile quickly).
GATES_PER_FUNCTION = 4000

_HERE = Path(__file__).parent


def literal(lit):
    """The C++ expression of AIG literal ``lit`` (``v[n]``, ``~v[n]`` or a constant)."""
    node = lit >> 1
    if node == 0:
        return "ONES" if lit & 1 else "ZERO"
    return f"~v[{node}]" if lit & 1 else f"v[{node}]"


def _operand(lit, local):
    node = lit >> 1
    name = f"t{node}" if node in local else f"v[{node}]"
    return name, bool(lit & 1)


def _gate(a, b, local):
    (x, x_inverted), (y, y_inverted) = _operand(a, local), _operand(b, local)
    if x_inverted and y_inverted:
        return f"~({x} | {y})"
    if x_inverted:
        return f"{y} & ~{x}"
    return f"{x} & ~{y}" if y_inverted else f"{x} & {y}"


def depth_first(graph):
    """The AND gates of ``graph`` (indices into ``graph.ands``) in depth-first order from the
    outputs and latches: each gate soon after the gates it reads, so most values are used
    while they are still in registers or the first cache level."""
    first = graph.first_and
    order, done = [], [False] * len(graph.ands)
    roots = [lit >> 1 for lits in graph.outputs.values() for lit in lits]
    roots += [lit >> 1 for lit, _ in graph.latches]
    for root in roots:
        if root < first or done[root - first]:
            continue
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            k = node - first
            if done[k]:
                continue
            if expanded:
                done[k] = True
                order.append(k)
                continue
            stack.append((node, True))
            for lit in reversed(graph.ands[k]):
                if lit >> 1 >= first and not done[(lit >> 1) - first]:
                    stack.append((lit >> 1, False))
    return order


def _functions(graph):
    """The gates as C++ functions of :data:`GATES_PER_FUNCTION` gates each, in depth-first
    order: a value read only inside its own function stays a local variable (the compiler keeps
    it in a register or a stack slot it reuses); the others are stored in ``v``."""
    first = graph.first_and
    order = depth_first(graph)
    chunk_of = {}
    for position, k in enumerate(order):
        chunk_of[first + k] = position // GATES_PER_FUNCTION
    shared = {lit >> 1 for lits in graph.outputs.values() for lit in lits}
    shared |= {lit >> 1 for lit, _ in graph.latches}
    for k in order:
        for lit in graph.ands[k]:
            node = lit >> 1
            if node >= first and chunk_of[node] != chunk_of[first + k]:
                shared.add(node)
    functions = []
    for start in range(0, len(order), GATES_PER_FUNCTION):
        local, lines = set(), []
        for k in order[start : start + GATES_PER_FUNCTION]:
            node = first + k
            a, b = graph.ands[k]
            lines.append(f"    const W t{node} = {_gate(a, b, local)};")
            local.add(node)
            if node in shared:
                lines.append(f"    v[{node}] = t{node};")
        name = f"eval_{len(functions)}"
        functions.append(
            (name, f"static void {name}(W* __restrict v) {{\n" + "\n".join(lines) + "\n}")
        )
    return functions


def ring_size(latency):
    """Transactions in flight one lane of the driver keeps, at most: a power of two, at least
    twice the block's ``latency`` (a pipeline holds one per stage) and 16."""
    need = max(16, 2 * (latency or 0) + 4)
    return 1 << (need - 1).bit_length()


def window_size(latency, lanes):
    """Transactions the driver's rings of rows and records hold: a power of two, at least 8192
    and twice what the lanes can have in flight (``lanes * (latency + 2)``), so that the bound it
    puts on how far ahead a lane may take a transaction seldom holds one back, while the rings
    stay small enough for the second-level cache (on ``fp32_add``, 10^6 transactions, 2^13 took
    about 10% less CPU time than 2^16 for ten more clock cycles in 3300)."""
    need = max(8192, 2 * lanes * ((latency or 0) + 2))
    return 1 << (need - 1).bit_length()


def driver_source(graph, in_width, out_width, words, ring=16, window=None):
    """C++ source of the bit-sliced driver of the :class:`~.netlist.Aig` ``graph`` (a pipeline
    block with ``i``/``o`` streams of payload widths ``in_width`` and ``out_width``), with
    ``words`` 64-bit words per bit slice, up to ``ring`` transactions in flight per lane (a
    power of two, see :func:`ring_size`) and rings of ``window`` rows and records (a power of
    two, by default :func:`window_size` of the latency ``ring`` allows)."""
    if words not in (1, 2, 4, 8, 16):
        raise ValueError(f"`words` must be one of 1, 2, 4, 8, 16, not {words!r}")
    if ring < 1 or ring & (ring - 1):
        raise ValueError(f"`ring` must be a power of two, not {ring!r}")
    window = window_size(ring // 2, 64 * words) if window is None else window
    if window < 1 or window & (window - 1):
        raise ValueError(f"`window` must be a power of two, not {window!r}")
    functions = _functions(graph)
    payload = graph.output("o__payload")
    if len(payload) != out_width:
        raise ValueError(f"`o__payload` has {len(payload)} bits, not {out_width}")
    padded = payload + [0] * (-len(payload) % 8)
    payload_nodes = [graph.input_node("i__payload", k) for k in range(in_width)]
    values = {
        "TOP": graph.top,
        "WORDS": str(words),
        "RING": str(ring),
        "WINDOW": str(window),
        "NODES": str(graph.nodes),
        "LATCHES": str(len(graph.latches)),
        "FIRST_LATCH": str(graph.first_latch),
        "IN_BITS": str(in_width),
        "OUT_BITS": str(out_width),
        "VALID_NODE": str(graph.input_node("i__valid")),
        "READY_NODE": str(graph.input_node("o__ready")),
        "PAYLOAD_NODES": ", ".join(map(str, payload_nodes)),
        "EVAL": "\n".join(text for _, text in functions),
        "EVAL_CALLS": "\n".join(f"    {name}(v);" for name, _ in functions),
        "I_READY": literal(graph.output("i__ready")[0]),
        "O_VALID": literal(graph.output("o__valid")[0]),
        "O_PAYLOAD": "\n".join(f"    bits[{k}] = {literal(lit)};" for k, lit in enumerate(padded)),
        "LATCH_INIT": "\n".join(
            f"    v[{graph.first_latch + k}] = ONES;"
            for k, (_, init) in enumerate(graph.latches)
            if init
        ),
        "LATCH_NEXT": "\n".join(
            f"    next_latch[{k}] = {literal(lit)};" for k, (lit, _) in enumerate(graph.latches)
        ),
    }
    template = (_HERE / "sliced_driver.cpp").read_text()
    for name, value in values.items():
        if f"@{name}@" not in template:
            raise ValueError(f"the driver template has no @{name}@")
        template = template.replace(f"@{name}@", value)
    return template

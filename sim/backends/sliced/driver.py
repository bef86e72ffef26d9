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
    "arranged",
    "driver_files",
    "driver_source",
    "latch_order",
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
    roots += [lit >> 1 for lit in graph.enables]
    roots += [lit >> 1 for core in graph.cores for lit in _core_literals(core)]
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


def arranged(graph):
    """``(graph, held)``: ``graph`` renumbered for the memory the driver touches, and the
    number of its latches updated through temporaries (the last ones).

    The latches are numbered in the order they take their next state (:func:`latch_order`:
    a pipeline's registers from the last stage to the first, so that a stage reads the one
    before it next in memory), then the gates in depth-first order from the outputs and the
    latches in that order (:func:`depth_first`), so that the stored values are written, and
    read by the latches, in one sweep. The driver evaluates the gates and updates the latches in
    node order. On the full ``ray_accel`` (658 439 gates, 232 864 latches, 512 lanes) the
    netlist's own numbering took about 9 ns of a cycle per latch: a cache miss each."""
    in_place, held = latch_order(graph)
    graph = graph.renumbered(latch_order=in_place + held)
    return graph.renumbered(gate_order=depth_first(graph)), len(held)


def _functions(graph, order=None):
    """The gates as C++ functions of :data:`GATES_PER_FUNCTION` gates each, in ``order`` (by
    default depth-first): a value read only inside its own function stays a local variable (the
    compiler keeps it in a register or a stack slot it reuses); the others are stored in
    ``v``."""
    first = graph.first_and
    order = depth_first(graph) if order is None else order
    chunk_of = {}
    for position, k in enumerate(order):
        chunk_of[first + k] = position // GATES_PER_FUNCTION
    shared = {lit >> 1 for lits in graph.outputs.values() for lit in lits}
    shared |= {lit >> 1 for lit, _ in graph.latches}
    shared |= {lit >> 1 for lit in graph.enables}
    shared |= {lit >> 1 for core in graph.cores for lit in _core_literals(core)}
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


#: Latch updates per generated function.
LATCHES_PER_FUNCTION = 4000


def _next_state(node, lit, enable):
    if enable == 1:
        return literal(lit)
    return f"({literal(enable)} & {literal(lit)}) | (~{literal(enable)} & v[{node}])"


def latch_order(graph):
    """``(in_place, held)``: the latches (indices) that may take their next state in place, in
    an order where every latch comes before the latches whose present state it reads (a
    pipeline's last stage first), and the others (those in or behind a loop of latches reading
    latches), which take theirs through temporaries after the rest. The gates were evaluated
    before, so only a latch read directly by another latch's next state or enable matters."""
    first, count = graph.first_latch, len(graph.latches)
    reads = []
    readers = [0] * count
    for k, ((lit, _), enable) in enumerate(zip(graph.latches, graph.enables)):
        nodes = {lit >> 1, enable >> 1}
        read = [
            node - first for node in nodes if first <= node < first + count and node - first != k
        ]
        reads.append(read)
        for j in read:
            readers[j] += 1
    ready = [k for k in range(count) if readers[k] == 0]
    order = []
    while ready:
        k = ready.pop()
        order.append(k)
        for j in reads[k]:
            readers[j] -= 1
            if readers[j] == 0:
                ready.append(j)
    placed = set(order)
    return order, [k for k in range(count) if k not in placed]


def _latch_functions(graph, order=None):
    """The latch updates as C++ functions ``update_N(v, t)`` of :data:`LATCHES_PER_FUNCTION`
    statements, to run in order: the held latches' next states into ``t``, the others in
    place (:func:`latch_order`), then the held ones from ``t``. No copy of the whole state is
    made: on a large pipeline the state is megabytes per cycle."""
    first = graph.first_latch
    in_place, held = latch_order(graph) if order is None else order
    statements = []
    for slot, k in enumerate(held):
        (lit, _), enable = graph.latches[k], graph.enables[k]
        statements.append(f"    t[{slot}] = {_next_state(first + k, lit, enable)};")
    for k in in_place:
        (lit, _), enable = graph.latches[k], graph.enables[k]
        statements.append(f"    v[{first + k}] = {_next_state(first + k, lit, enable)};")
    for slot, k in enumerate(held):
        statements.append(f"    v[{first + k}] = t[{slot}];")
    functions = []
    for start in range(0, len(statements), LATCHES_PER_FUNCTION):
        name = f"update_{len(functions)}"
        body = "\n".join(statements[start : start + LATCHES_PER_FUNCTION])
        functions.append(
            (name, f"static void {name}(W* __restrict v, W* __restrict t) {{\n{body}\n}}")
        )
    return functions, len(held)


def _core_literals(core):
    return [core.en] + [lit for operand in core.operands for lit in operand]


#: unit -> (the operation's C++ on the operands ``x0, x1, ...`` giving ``r0`` and, for two
#: result words, ``r1``; result words). One-bit operands are 0 or 1 per lane.
_CORE_CALLS = {
    "add": ("r0 = vfp32::add(x0, x1, x2, FTZ);", 1),
    "mul": ("r0 = vfp32::mul(x0, x1, FTZ);", 1),
    "fma": ("r0 = vfp32::fused(x0, x1, x2, FTZ);", 1),
    "div": ("r0 = vfp32::divide(x0, x1, FTZ);", 1),
    "rcp": ("r0 = vfp32::divide((U){} + 0x3F800000u, x0, FTZ);", 1),
    "cmp": ("r0 = vfp32::cmp(x0, x1, FTZ);", 1),
    "minmax": ("vfp32::minmax(x0, x1, FTZ, &r0, &r1);", 2),
    "f2i": ("vfp32::f2i(x0, x1, FTZ, &r0, &r1);", 2),
    "i2f": ("r0 = vfp32::i2f(x0, x1, FTZ);", 1),
}


def _core_code(graph):
    """``(declarations and functions, step calls, commit calls)``: the C++ of the graph's
    behavioural FP32 cores (:mod:`.sliced_fp32.h <gpurtl.sim.backends.sliced>`).

    Each core keeps its delay line as values, lane by lane (``line_K``: ``stages`` x result
    words x 32 vectors of :c:macro:`LANE_GROUP` lanes). ``core_K_step`` reads the operands and
    the enable from the bit slices, turns the operands into values (:c:func:`transpose32`), and
    in each lane whose enable is set shifts the line by one and puts the new result first;
    ``core_K_commit`` turns the line's last stage back into the output bit slices. All cores step
    before any commits, as all flip-flops take their inputs at one clock edge.
    """
    parts, steps, commits = [], [], []
    for k, core in enumerate(graph.cores):
        if core.unit not in _CORE_CALLS:
            raise ValueError(f"the sliced backend has no behavioural `{core.unit}` core")
        call, results = _CORE_CALLS[core.unit]
        if core.bits > 32 * results:
            raise ValueError(
                f"core {k} ({core.unit}) has {core.bits} output bits, not {32 * results}"
            )
        stages = core.stages
        lines = [f"alignas(64) static U line_{k}[{stages * results * 32}];"]
        lines.append(f"static void core_{k}_step(const W* v) {{")
        lines.append(f"    const int FTZ = {int(core.ftz)};")
        lines.append(f"    const U en = (U)({literal(core.en)});")
        for n, operand in enumerate(core.operands):
            if len(operand) == 1:
                lines.append(f"    const U flag{n} = (U)({literal(operand[0])});")
            else:
                lines.append(f"    alignas(64) U op{n}[32];")
                for b in range(32):
                    lit = operand[b] if b < len(operand) else 0
                    lines.append(f"    op{n}[{b}] = (U)({literal(lit)});")
                lines.append(f"    transpose32(op{n});")
        lines.append("    for (int j = 0; j < 32; j++) {")
        lines.append("        const U m = -((en >> j) & 1);")
        for n, operand in enumerate(core.operands):
            source = f"(flag{n} >> j) & 1" if len(operand) == 1 else f"op{n}[j]"
            lines.append(f"        const U x{n} = {source};")
        lines.append("        U r0 = {}, r1 = {};")
        lines.append(f"        {call}")
        lines.append("        (void)r1;")
        for stage in range(stages - 1, -1, -1):
            for r in range(results):
                here = f"line_{k}[{(stage * results + r) * 32} + j]"
                came = f"line_{k}[{((stage - 1) * results + r) * 32} + j]" if stage else f"r{r}"
                lines.append(f"        {here} = vfp32::pick(m, {came}, {here});")
        lines.append("    }")
        lines.append("}")
        lines.append(f"static void core_{k}_commit(W* v) {{")
        last = (stages - 1) * results * 32
        for r in range(results):
            width = min(32, core.bits - 32 * r)
            if width <= 0:
                continue
            lines.append("    {")
            lines.append("        alignas(64) U x[32];")
            lines.append(
                f"        for (int b = 0; b < 32; b++) x[b] = line_{k}[{last + r * 32} + b];"
            )
            lines.append("        transpose32(x);")
            lines.append(
                f"        for (int b = 0; b < {width}; b++) v[{core.first + 32 * r} + b] = (W)x[b];"
            )
            lines.append("    }")
        lines.append("}")
        parts.append("\n".join(lines))
        steps.append(f"    core_{k}_step(v);")
        commits.append(f"    core_{k}_commit(v);")
    return "\n".join(parts), "\n".join(steps), "\n".join(commits)


def _core_headers():
    """The headers the cores' C++ needs, as text: the operations one value at a time
    (``fp32_ops.h`` of the fast backend) and their vector form (``sliced_fp32.h``)."""
    from ..fast.behavioural import ops_header

    return ops_header() + "\n" + (_HERE / "sliced_fp32.h").read_text()


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


#: Gate functions per separately compiled file of a large graph (:func:`driver_files`).
FUNCTIONS_PER_FILE = 16

_PART_HEAD = """// Gates of @TOP@, part @PART@: generated by gpurtl.sim.backends.sliced.driver.
#include <cstdint>
static const int WORDS = @WORDS@;
typedef uint64_t W __attribute__((vector_size(8 * WORDS)));
static const W ZERO = {};
static const W ONES = ~ZERO;
"""


def driver_source(graph, in_width, out_width, words, ring=16, window=None):
    """C++ source of the bit-sliced driver of the :class:`~.netlist.Aig` ``graph`` (a pipeline
    block with ``i``/``o`` streams of payload widths ``in_width`` and ``out_width``), with
    ``words`` 64-bit words per bit slice, up to ``ring`` transactions in flight per lane (a
    power of two, see :func:`ring_size`) and rings of ``window`` rows and records (a power of
    two, by default :func:`window_size` of the latency ``ring`` allows)."""
    return driver_files(graph, in_width, out_width, words, ring, window, split=False)["driver.cpp"]


def driver_files(graph, in_width, out_width, words, ring=16, window=None, *, split=True):
    """The sources of :func:`driver_source`, ``{file name: text}``: with ``split``, the gate
    functions of a graph of more than :data:`FUNCTIONS_PER_FILE` of them go to files of that
    many (``gates_K.cpp``), which compile in parallel; ``driver.cpp`` declares them."""
    if words not in (1, 2, 4, 8, 16):
        raise ValueError(f"`words` must be one of 1, 2, 4, 8, 16, not {words!r}")
    if ring < 1 or ring & (ring - 1):
        raise ValueError(f"`ring` must be a power of two, not {ring!r}")
    window = window_size(ring // 2, 64 * words) if window is None else window
    if window < 1 or window & (window - 1):
        raise ValueError(f"`window` must be a power of two, not {window!r}")
    graph, held = arranged(graph)
    count = len(graph.latches)
    gate_functions = _functions(graph, range(len(graph.ands)))
    latch_functions, held = _latch_functions(
        graph, (list(range(count - held)), list(range(count - held, count)))
    )
    functions = gate_functions + latch_functions
    parts = {}
    if split and len(functions) > FUNCTIONS_PER_FILE:
        head = _PART_HEAD.replace("@TOP@", graph.top).replace("@WORDS@", str(words))
        for start in range(0, len(functions), FUNCTIONS_PER_FILE):
            number = start // FUNCTIONS_PER_FILE
            texts = [
                text.replace("static void ", "void ", 1)
                for _, text in functions[start : start + FUNCTIONS_PER_FILE]
            ]
            parts[f"gates_{number}.cpp"] = head.replace("@PART@", str(number)) + "\n".join(texts)
        evals = "\n".join(f"void {name}(W* __restrict v);" for name, _ in gate_functions)
        evals += "\n" + "\n".join(
            f"void {name}(W* __restrict v, W* __restrict t);" for name, _ in latch_functions
        )
    else:
        evals = "\n".join(text for _, text in functions)
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
        "EVAL": evals,
        "EVAL_CALLS": "\n".join(f"    {name}(v);" for name, _ in gate_functions),
        "HELD": str(max(1, held)),
        "UPDATE_CALLS": "\n".join(f"    {name}(v, held);" for name, _ in latch_functions),
        "I_READY": literal(graph.output("i__ready")[0]),
        "O_VALID": literal(graph.output("o__valid")[0]),
        "O_PAYLOAD": "\n".join(f"    bits[{k}] = {literal(lit)};" for k, lit in enumerate(padded)),
        "LATCH_INIT": "\n".join(
            f"    v[{graph.first_latch + k}] = ONES;"
            for k, (_, init) in enumerate(graph.latches)
            if init
        ),
    }
    cores, core_steps, core_commits = _core_code(graph)
    values["CORE_HEADERS"] = _core_headers() if graph.cores else ""
    values["CORES"] = cores
    values["CORE_STEPS"] = core_steps
    values["CORE_COMMITS"] = core_commits
    template = (_HERE / "sliced_driver.cpp").read_text()
    for name, value in values.items():
        if f"@{name}@" not in template:
            raise ValueError(f"the driver template has no @{name}@")
        template = template.replace(f"@{name}@", value)
    return {"driver.cpp": template, **parts}

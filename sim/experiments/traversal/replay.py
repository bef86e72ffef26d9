"""The RTL replays of the traversal experiment: instructions of the per-wave loop
(:func:`gpurtl.golden.traversal.loop.trace_wave`) through the ``ray_accel`` and ``ds_bvh_stack``
RTL in Amaranth's simulator, against the results the loop used."""

__all__ = ["replay_instructions", "rtl_replay", "stack_replay"]


def rtl_replay(buckets, limit):
    """Replay about ``limit`` intersect instructions, evenly spaced within each bucket (one per
    scene and mode), through the ``ray_accel`` RTL; ``(passed, failed, {kind: count})``."""
    per = max(1, limit // max(1, len(buckets)))
    records = [
        recs[k * len(recs) // per] for recs in buckets.values() for k in range(min(per, len(recs)))
    ]
    return replay_instructions(records)


def replay_instructions(records):
    """``(passed, failed, {kind: count})`` of ``records`` (``(instruction, result)``) through
    the ``ray_accel`` RTL; None for no records."""
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.core import registry

    if not records:
        return None
    picks = records
    block = registry.get("ray_accel")
    params = block.resolve({})
    report = BACKENDS["pysim"].run(
        block, params, [i for i, _ in picks], expected=[o for _, o in picks]
    )
    kinds = {}
    for instr, _ in picks:
        if instr["dual"]:
            key = "dual " + "+".join(
                "empty" if p == 0x5 else "box" if p & 7 == 5 else "tri" for p in instr["node_ptr"]
            )
        else:
            key = (
                "bvh8 box"
                if instr["node_ptr"][0] & 0xF == 5
                else ("instance" if instr["node_ptr"][0] & 7 == 6 else "triangle pair")
            )
        kinds[key] = kinds.get(key, 0) + 1
    return report.passed, report.failed, kinds


def stack_replay(scenes, origins, dirs, *, stack_size=16, limit=None):
    """Replay the stack instructions of one wave per scene (in program order, the LDS carrying
    over) through the ``ds_bvh_stack`` RTL (Amaranth simulator, one build for all), expecting
    the results the loop used. ``limit``: at most that many instructions per scene (a prefix,
    which keeps the LDS contents consistent). Returns ``(passed, failed, {opcode: count})``."""
    from gpurtl.facts.ray_accel import INVALID_NODE
    from gpurtl.golden.ray_accel.ds_bvh_stack import unpack_stack_addr
    from gpurtl.golden.traversal.loop import trace_wave
    from gpurtl.sim.backends import BACKENDS
    from gpurtl.sim.core import registry

    requests, expected = [], []

    def record(request, response):
        new, dst = response
        dst0, dst1 = dst if isinstance(dst, tuple) else (dst, INVALID_NODE)
        requests.append(
            dict(request, stack_addr=unpack_stack_addr(request["stack_addr"]), tri_size_opt=0)
        )
        expected.append(
            {"stack_addr": unpack_stack_addr(new), "dst0": dst0, "dst1": dst1, "error": 0}
        )

    for scene in scenes:
        start = len(requests)
        trace_wave(scene, origins[:32], dirs[:32], stack_size=stack_size, stack_record=record)
        if limit is not None:
            del requests[start + limit :], expected[start + limit :]
    ops = {}
    for request in requests:
        name = {224: "push4_pop1", 225: "push8_pop1", 226: "push8_pop2"}[request["op"]]
        ops[name] = ops.get(name, 0) + 1
    block = registry.get("ds_bvh_stack")
    params = block.resolve({"stack_size": stack_size, "waves": 1, "lanes": 32})
    report = BACKENDS["pysim"].run(block, params, requests, expected=expected)
    return report.passed, report.failed, ops

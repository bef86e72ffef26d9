"""A closest-hit traversal loop for one wave, with the RTL inside the loop.

Two co-simulation sessions stand in for the hardware a ray-tracing shader uses: ``ray_accel``
(``image_bvh8_intersect_ray``) and ``ds_bvh_stack`` (``ds_bvh_stack_push8_pop1``). Each
iteration sends one instruction per active lane of the wave to the ray accelerator, reads the
results, turns them into one stack instruction per lane, and reads the next node each lane
visits. Every decision -- which node a lane visits next, whether a triangle hit is closer, when a
lane is done -- is taken from the outputs of the RTL; both sessions also check every output
against the golden models.

The loop is the one of gpurt ``src/shaders/TraceRay3_1.hlsl`` reduced to a BLAS of BVH8 box
nodes and compressed triangle-pair leaves: a box node's sorted child pointers are pushed; a
triangle node's hits update the closest hit (its distance becomes the ray extent of the lane's
next instructions) and the stack continues the leaf's primitive range; ``TERMINAL_NODE`` ends a
lane. The scene is small enough that the stack never overflows (no walk-back).

``python examples/closest_hit.py [--backend fast] [--rays 32]``
"""

import argparse
import sys
import time

import numpy as np

from gpurtl.facts.ds_bvh_stack import StackOp
from gpurtl.facts.ray_accel import INVALID_NODE, ROOT_NODE_PTR, TERMINAL_NODE
from gpurtl.golden.bvh import build_bvh
from gpurtl.golden.bvh.mesh import box_mesh, merge
from gpurtl.golden.ray_accel.ds_bvh_stack import BvhStackModel
from gpurtl.golden.ray_accel.encode.ray import default_desc
from gpurtl.sim.backends import BACKENDS
from gpurtl.sim.core import registry

#: A small ray accelerator with the triangle paths: one engine testing one box per cycle, no ray
#: transforms (the scene has no instances).
RAY_ACCEL = {"engines": 1, "boxes_per_engine": 1, "transforms": False}

POS_INF = 0x7F800000  # the bit pattern of +infinity: no hit yet


def scene(boxes=6, seed=1):
    """A BLAS of ``boxes`` closed boxes (12 triangles each) at random places."""
    rng = np.random.default_rng(seed)
    meshes = [
        box_mesh(rng.uniform(0.2, 0.6, 3), center=rng.uniform(-2, 2, 3)) for _ in range(boxes)
    ]
    return build_bvh(merge(meshes), width=8, obb_threshold=None)


def rays(bvh, count, seed=2):
    """``count`` rays from a point in front of the scene: most aimed near a random triangle,
    every eighth one past the scene."""
    rng = np.random.default_rng(seed)
    origins = np.tile([0.0, 0.0, -8.0], (count, 1)) + rng.normal(0, 0.1, (count, 3))
    triangles = bvh.mesh.triangles
    targets = triangles[rng.integers(0, len(triangles), count)].mean(axis=1)
    targets += rng.normal(0, 0.05, (count, 3))
    targets[::8] = [6.0, 6.0, 0.0]  # misses
    return origins.astype(np.float32), (targets - origins).astype(np.float32)


def bits3(vector):
    return [int(v) for v in np.asarray(vector, np.float32).view(np.uint32)]


class Lane:
    """What one lane keeps in its registers between iterations."""

    def __init__(self, origin, direction, base):
        self.origin, self.dir = bits3(origin), bits3(direction)
        self.node = ROOT_NODE_PTR
        self.t_hit = POS_INF
        self.prim = -1
        self.stack = {
            "valid_entries": 0,
            "entries_to_tlas": 0,
            "addr": 0,
            "base": base,
            "has_tlas": 0,
            "has_overflowed": 0,
            "blas2tlas_pop": 0,
        }
        self.done = False


def intersect_instruction(bvh, lane, desc):
    """``image_bvh8_intersect_ray`` on the lane's node, with the closest hit as the extent."""
    dwords = bvh.image[(lane.node & ~0xF) << 3]
    return {
        "dual": 0,
        "ray": {
            "origin": lane.origin,
            "dir": lane.dir,
            "extent": lane.t_hit,
            "instance_mask": 0xFF,
        },
        "node_ptr": [lane.node, 0],
        "node": [list(dwords) + [0] * (32 - len(dwords)), [0] * 32],
        "pointer_flags": 0,
        "desc": desc,
    }


def stack_instruction(lane, result):
    """The lane's ``ds_bvh_stack_push8_pop1`` after the ray accelerator's ``result``."""
    dw = result["dw"]
    if lane.node & 0xF == 5:  # a box node: its children, sorted by the ray accelerator
        data, last = dw[:8], INVALID_NODE
    else:  # a triangle pair: keep the closer hit, continue the leaf's primitive range
        for k in (0, 1):
            t = dw[4 * k]
            if t < lane.t_hit and not t & 0x80000000:  # positive floats order as integers
                lane.t_hit, lane.prim = t, dw[4 * k + 3] >> 1
        data, last = [INVALID_NODE] * 7 + [lane.node], 0xFFFFFFF8 | (dw[8] & 3)
    return {
        "op": int(StackOp.PUSH8_POP1),
        "stack_addr": lane.stack,
        "last_node_ptr": last,
        "data": [int(d) for d in data],
        "tri_size_opt": 0,
        "prim_range": 1,
    }


def closest_hits(bvh, origins, directions, *, backend="fast", ray_accel=None):
    """Trace one wave (up to 32 rays) on ``backend``; returns the hit distances (inf for a
    miss), the primitive indices (-1) and the number of loop iterations."""
    accel = registry.get("ray_accel")
    accel_params = accel.resolve(ray_accel or RAY_ACCEL)
    stack = registry.get("ds_bvh_stack")
    stack_params = stack.resolve()
    model = BvhStackModel(**stack_params)
    lanes = [Lane(o, d, model.base_of(0, k)) for k, (o, d) in enumerate(zip(origins, directions))]
    desc = default_desc()
    chosen = BACKENDS[backend]
    iterations = 0
    with (
        chosen.session(accel, accel_params, golden=True, strict=True) as rt,
        chosen.session(stack, stack_params, golden=True, strict=True) as ds,
    ):
        while not all(lane.done for lane in lanes):
            active = [lane for lane in lanes if not lane.done]
            rt.send([intersect_instruction(bvh, lane, desc) for lane in active])
            results = rt.receive()
            ds.send([stack_instruction(lane, result) for lane, result in zip(active, results)])
            for lane, answer in zip(active, ds.receive()):
                lane.stack = answer["stack_addr"]
                lane.node = answer["dst0"]
                if lane.node == TERMINAL_NODE:
                    lane.done = True
                elif lane.node == INVALID_NODE:
                    raise RuntimeError("the stack overflowed: this example has no walk-back")
            iterations += 1
    t = np.array([lane.t_hit for lane in lanes], np.uint32).view(np.float32).astype(np.float64)
    return t, np.array([lane.prim for lane in lanes]), iterations


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=list(BACKENDS), default="fast")
    parser.add_argument("--rays", type=int, default=32, help="lanes of the wave (1..32)")
    args = parser.parse_args(argv)
    bvh = scene()
    origins, directions = rays(bvh, args.rays)
    started = time.monotonic()
    t, prim, iterations = closest_hits(bvh, origins, directions, backend=args.backend)
    hits = int(np.isfinite(t).sum())
    print(
        f"{args.rays} rays on {args.backend}: {hits} hits, {iterations} loop iterations, "
        f"{time.monotonic() - started:.1f} s"
    )
    for k in range(args.rays):
        print(
            f"  ray {k:2d}: " + (f"t = {t[k]:.4f}, triangle {prim[k]}" if prim[k] >= 0 else "miss")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

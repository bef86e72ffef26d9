"""Wave programs of the traversal loop on the compiled RT-unit player, at any ``rt_unit`` build.

    python examples/rt_unit_player.py RAYS [-p NAME=VALUE ...] [--batched]
    python examples/rt_unit_player.py 1024 -p preset=rdna4      # 32 waves resident
    python examples/rt_unit_player.py 100000 -p preset=rdna4 --batched

Records the programs of ``RAYS`` sphere rays of the packaged small bunny
(:func:`gpurtl.golden.traversal.program.from_loop`; ``--batched``: from the wave-batched loop,
``gpurtl.golden.traversal.streams.build``), plays them on the ``rt_unit`` build of the
``-p`` parameters (default: ``traversal --rtl``'s build;
:func:`gpurtl.sim.backends.fast.player.run_player`; the first run builds the model) under the
CU model's RDNA 4 shader side and memory, and prints one JSON line: rays, waves, wave and lane
instructions, RTL cycles, mismatches, L0 lookups, refusals, lanes in
flight, and the CPU seconds of the programs and of the player process.
"""

import argparse
import json
import resource


def cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main():
    from gpurtl.golden.bvh import mesh as M
    from gpurtl.golden.traversal.program import from_loop
    from gpurtl.golden.traversal.rays import sphere_rays
    from gpurtl.golden.traversal.scene import build_scene
    from gpurtl.sim.backends.fast.player import run_player
    from gpurtl.sim.core import registry
    from gpurtl.sim.experiments.traversal.rtl import cu_params, rt_unit_params

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rays", type=int)
    parser.add_argument("-p", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--batched", action="store_true", help="programs of the batched loop")
    args = parser.parse_args()
    # without -p: the build of `traversal --rtl` (the registry's default has no triangle path)
    given = dict(item.split("=", 1) for item in args.p)
    rt = registry.get("rt_unit").resolve(given) if given else rt_unit_params()
    params = cu_params(rt)
    bunny = M.bunny()
    scene = build_scene("bunny", bunny, "bvh8")
    origins, dirs = sphere_rays(bunny, args.rays, seed=3)
    start = cpu()
    if args.batched:
        from gpurtl.golden.bvh.wavefront import Tables
        from gpurtl.golden.traversal import streams

        programs = streams.build(Tables(scene.top), origins, dirs, params)
    else:
        programs = from_loop(scene, origins, dirs, params)
    programs_cpu = cpu() - start
    out = run_player(programs, rt, params, log=print)
    print(
        json.dumps(
            {
                "rays": args.rays,
                "waves": programs.waves,
                "wave_instructions": programs.iterations,
                "lane_instructions": programs.entries,
                "cycles": out.cycles,
                "mismatches": out.mismatches,
                "lookups": out.lookups,
                "refused": out.refused,
                "in_flight": out.in_flight,
                "slots_used": len(set(out.waves[:, 0].tolist())),
                "programs_cpu_s": round(programs_cpu, 2),
                "player_cpu_s": round(out.cpu_seconds, 2),
                "player_wall_s": round(out.sim_seconds, 2),
            }
        )
    )


if __name__ == "__main__":
    main()

"""The fast backend behind the harness's ``run_block`` / ``check`` and the command line."""

import os

from ...core.registry import RegistryError

__all__ = ["TOP_ENV", "default_top", "run_block_fast", "check_fast"]

#: Environment variable choosing the top of ``--backend fast`` (``batch`` or ``stalled``).
TOP_ENV = "GPURTL_FAST_TOP"


def default_top():
    """``$GPURTL_FAST_TOP`` or ``batch`` (the faster top; see :class:`~.top.BatchTop`)."""
    from .build import TOPS

    top = os.environ.get(TOP_ENV, "batch")
    if top not in TOPS:
        raise RegistryError(f"${TOP_ENV} must be one of {', '.join(TOPS)}, not {top!r}")
    return top


def _usable(block, vcd):
    if block.kind != "pipeline":
        raise RegistryError(
            f"the fast backend runs pipeline blocks only; `{block.name}` is "
            f"cycle-stepped (use --backend verilator)"
        )
    if vcd:
        raise RegistryError(
            "the fast backend writes no waveform; use --backend verilator or pysim with --vcd"
        )


def run_block_fast(
    block, params, input_bits, expected_bits, stalls, *, vcd=None, keep_outputs=False, top=None
):
    """:func:`gpurtl.sim.harness.lockstep.run_block` on the compiled model."""
    from .run import run_transactions

    _usable(block, vcd)
    return run_transactions(
        block,
        params,
        input_bits,
        expected_bits,
        seed=stalls.rng.getrandbits(31),
        p_valid=stalls.p_valid,
        p_ready=stalls.p_ready,
        free_run=stalls.free_run,
        top=top or default_top(),
        keep_outputs=keep_outputs,
    )


def check_fast(
    block,
    params,
    *,
    count,
    seed,
    vcd=None,
    p_valid=0.7,
    p_ready=0.7,
    top=None,
    processes=None,
    log=None,
):
    """:func:`gpurtl.sim.harness.lockstep.check` on the compiled model; ``log(text)`` hears progress."""
    from .run import check

    _usable(block, vcd)
    return check(
        block,
        params,
        count=count,
        seed=seed,
        top=top or default_top(),
        processes=processes,
        p_valid=p_valid,
        p_ready=p_ready,
        log=log,
    )

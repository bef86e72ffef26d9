"""Transactions as packed words: the batch form of a block's stimulus and golden model.

A row is a payload's flat bit pattern (:func:`gpurtl.sim.core.layouts.pack`) as little-endian 32-bit
words, word 0 holding bits 0..31. A block may provide ``stimulus_words`` / ``golden_words`` hooks
(see :class:`gpurtl.sim.core.registry.Block`); otherwise the scalar stimulus and golden model are used
and packed, a chunk at a time.
"""

import numpy as np
from amaranth.hdl import Shape

from ...core import layouts
from .driver import words_of

__all__ = ["to_words", "from_words", "stimulus_words", "golden_words", "batches"]

#: Transactions per chunk when the scalar fallback builds Python dictionaries.
CHUNK = 1 << 15


def to_words(width, values):
    """``(len(values), words_of(width))`` uint32 array of the bit patterns ``values`` (ints)."""
    nbytes = 4 * words_of(width)
    data = b"".join(int(value).to_bytes(nbytes, "little") for value in values)
    return np.frombuffer(data, dtype="<u4").reshape(len(values), nbytes // 4).copy()


def from_words(rows):
    """The bit patterns (ints) of the rows of a uint32 array."""
    rows = np.ascontiguousarray(rows, dtype="<u4")
    return [int.from_bytes(row.tobytes(), "little") for row in rows]


def stimulus_words(block, params, rng, count):
    """``count`` random inputs of ``block`` as rows of words."""
    hook = getattr(block, "stimulus_words", None)
    if hook is not None:
        return np.asarray(hook(rng, count, **params), dtype=np.uint32)
    in_layout, _ = block.layouts(**params)
    return to_words(
        Shape.cast(in_layout).width,
        [layouts.pack(in_layout, value) for value in block.stimulus(rng, count, **params)],
    )


def golden_words(block, params, words):
    """The golden outputs of the input rows ``words``, as rows of words."""
    hook = getattr(block, "golden_words", None)
    if hook is not None:
        return np.asarray(hook(words, **params), dtype=np.uint32)
    from ...harness.lockstep import golden_outputs

    in_layout, out_layout = block.layouts(**params)
    inputs = [layouts.unpack(in_layout, bits) for bits in from_words(words)]
    outputs = golden_outputs(block, params, inputs)
    return to_words(
        Shape.cast(out_layout).width, [layouts.pack(out_layout, value) for value in outputs]
    )


def batches(block, params, rng, count, chunk=CHUNK):
    """``(input_rows, expected_rows)`` chunks of ``count`` random transactions in total.

    Without hooks the stimulus is drawn a chunk at a time; a ``count`` that fits one chunk gives
    exactly the transactions of ``block.stimulus(rng, count)`` (as the other backends check).
    """
    in_layout, out_layout = block.layouts(**params)
    scalar = getattr(block, "stimulus_words", None) is None
    done = 0
    while done < count:
        size = min(chunk, count - done)
        if scalar and getattr(block, "golden_words", None) is None:
            # Golden model on the stimulus dictionaries themselves (no unpack round trip).
            from ...harness.lockstep import golden_outputs

            inputs = block.stimulus(rng, size, **params)
            outputs = golden_outputs(block, params, inputs)
            yield (
                to_words(
                    Shape.cast(in_layout).width,
                    [layouts.pack(in_layout, value) for value in inputs],
                ),
                to_words(
                    Shape.cast(out_layout).width,
                    [layouts.pack(out_layout, value) for value in outputs],
                ),
            )
        else:
            rows = stimulus_words(block, params, rng, size)
            yield rows, golden_words(block, params, rows)
        done += size

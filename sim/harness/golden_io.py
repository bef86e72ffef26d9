"""Golden-model inputs and outputs: the block's golden model on dictionaries, bit patterns or word
rows, and its random stimulus, produced a chunk at a time so that memory stays flat.

A block may provide ``stimulus_words`` / ``golden_words`` hooks (see
:class:`gpurtl.sim.core.registry.Block`); otherwise the scalar stimulus and golden model are used
and packed.
"""

import collections

import numpy as np

from ..core import layouts
from ..core.words import columns_from_words, ints_from_words, words_from_columns, words_from_ints

__all__ = [
    "CHUNK",
    "WORD_CHUNK",
    "GoldenModel",
    "golden_outputs",
    "random_stream",
    "stimulus_words",
    "golden_words",
    "batches",
]

#: Transactions (or cycles) generated, run through the golden model and packed at a time by
#: :func:`random_stream`: memory stays flat for any ``count``. Each chunk is one call of the
#: block's ``stimulus``, so the corner cases it puts first recur once per chunk. The first chunk
#: is at least the block's ``check_count``, so a run of up to that many is one call.
CHUNK = 4096

#: Transactions per chunk of :func:`batches` (word rows, for the compiled backend).
WORD_CHUNK = 1 << 15


class GoldenModel:
    """One golden model instance of ``block`` (state carries over between calls: the cycle
    blocks' models and stateful pipelines such as ``ds_bvh_stack``)."""

    def __init__(self, block, params):
        self.block, self.params = block, params
        self.kind = block.kind
        self.model = block.golden(**params)
        self._in_layout, self._out_layout = block.layouts(**params)
        #: Rows per :meth:`rows` call that keep memory flat: a model on columns holds a few
        #: integers per field and row, one on dictionaries a dictionary per row.
        self.row_chunk = (
            WORD_CHUNK if self.kind != "pipeline" and hasattr(self.model, "columns") else CHUNK
        )

    def outputs(self, inputs):
        """Golden outputs (dictionaries) for a list of input dictionaries."""
        if self.kind == "pipeline":
            if hasattr(self.model, "batch"):
                return list(self.model.batch(inputs))
            return [self.model(tx) for tx in inputs]
        return [self.model.step(tx) for tx in inputs]

    def bits(self, input_bits):
        """Golden output bit patterns for input bit patterns."""
        inputs = [layouts.unpack(self._in_layout, bits) for bits in input_bits]
        return [layouts.pack(self._out_layout, value) for value in self.outputs(inputs)]

    def rows(self, rows):
        """Golden output word rows for input word rows (the block's ``golden_words`` hook when it
        has one and no state: a pipeline's hook sees each call's rows alone; else the model's own
        ``rows`` method when it has one, e.g. a stateful pipeline's; a cycle block's model with a
        ``columns`` method runs on per-field columns, ``{dotted path: array}`` in and out)."""
        hook = getattr(self.block, "golden_words", None)
        if hook is not None and self.kind == "pipeline":
            return np.asarray(hook(rows, **self.params), dtype=np.uint32)
        if self.kind == "pipeline" and hasattr(self.model, "rows"):
            return np.asarray(self.model.rows(rows), dtype=np.uint32)
        if self.kind != "pipeline" and hasattr(self.model, "columns"):
            rows = np.asarray(rows)
            outputs = self.model.columns(columns_from_words(self._in_layout, rows))
            return words_from_columns(self._out_layout, outputs, len(rows))
        return words_from_ints(self._out_layout, self.bits(ints_from_words(rows)))


def golden_outputs(block, params, inputs):
    """Golden outputs (dictionaries) for a list of input dictionaries."""
    return GoldenModel(block, params).outputs(inputs)


def random_stream(block, params, count, seed, *, chunk=None):
    """``(input_bits, expected_bits)``: two iterators over ``count`` random transactions (or
    cycles) of ``block`` and their golden outputs, produced ``chunk`` at a time.

    Reading ``input_bits`` generates the expected outputs of each chunk, so the driver must read an
    input before its output is compared (true for every driver); memory holds one chunk.
    """
    chunk = chunk or CHUNK
    first = max(chunk, block.check_count)
    in_layout, out_layout = block.layouts(**params)
    rng = np.random.default_rng(seed)
    model = GoldenModel(block, params)
    expected = collections.deque()

    def inputs():
        done = 0
        while done < count:
            batch = block.stimulus(rng, min(first if done == 0 else chunk, count - done), **params)
            if not batch:
                raise ValueError(f"`stimulus` of block `{block.name}` returned no inputs")
            for value in model.outputs(batch):
                expected.append(layouts.pack(out_layout, value))
            for value in batch:
                yield layouts.pack(in_layout, value)
            done += len(batch)
            del batch

    def outputs():
        while True:
            yield expected.popleft()

    return inputs(), outputs()


def stimulus_words(block, params, rng, count):
    """``count`` random inputs of ``block`` as word rows."""
    hook = getattr(block, "stimulus_words", None)
    if hook is not None:
        return np.asarray(hook(rng, count, **params), dtype=np.uint32)
    in_layout, _ = block.layouts(**params)
    return words_from_ints(
        in_layout,
        [layouts.pack(in_layout, value) for value in block.stimulus(rng, count, **params)],
    )


def golden_words(block, params, words):
    """The golden outputs of the input rows ``words``, as word rows (a fresh golden model)."""
    return GoldenModel(block, params).rows(words)


def batches(block, params, rng, count, chunk=WORD_CHUNK):
    """``(input_rows, expected_rows)`` chunks of ``count`` random transactions in total.

    Without hooks the stimulus is drawn a chunk at a time; a ``count`` that fits one chunk gives
    exactly the transactions of ``block.stimulus(rng, count)`` (as the other backends check).
    """
    in_layout, out_layout = block.layouts(**params)
    scalar = getattr(block, "stimulus_words", None) is None
    model = GoldenModel(block, params)
    done = 0
    while done < count:
        size = min(chunk, count - done)
        if scalar and getattr(block, "golden_words", None) is None:
            # Golden model on the stimulus dictionaries themselves (no unpack round trip).
            inputs = block.stimulus(rng, size, **params)
            outputs = model.outputs(inputs)
            yield (
                words_from_ints(in_layout, [layouts.pack(in_layout, v) for v in inputs]),
                words_from_ints(out_layout, [layouts.pack(out_layout, v) for v in outputs]),
            )
        else:
            rows = stimulus_words(block, params, rng, size)
            yield rows, model.rows(rows)
        done += size

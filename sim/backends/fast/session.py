"""A session on the compiled model: the driver's session mode, alive for the whole session.

The driver process (:mod:`.driver`, ``--session``) reads requests from one pipe and writes answers
to another: rows to append to its input queue, and how many outputs (or cycles) to run for. The
stall policy is the batch mode's, applied cycle by cycle as the session runs.

A cycle-stepped block's session (:class:`FastCycleSession`) runs the cycle driver's session mode
(``cycle_driver.cpp``): any number of cycles' inputs a request, answered with their outputs.
"""

import os
import struct
import subprocess

import numpy as np

from ...core.words import words_of
from ...harness.session import Exchange, Session
from .build import model as build_model

__all__ = ["FastCycleSession", "FastSession"]

_EXCHANGE, _CLOSE = 1, 2

#: Cycles without an output, while outputs are awaited, after which the driver gives up.
MAX_IDLE = 10_000


class FastSession(Session):
    """A :class:`~gpurtl.sim.harness.session.Session` on the fast backend's compiled model.

    ``top`` chooses the model (``"batch"``: the block behind
    :class:`~gpurtl.sim.backends.fast.top.BatchTop`, whose latency is the block's plus one;
    ``"stalled"``: the block itself); ``fp_cores`` its FP32 cores (``"rtl"`` or
    ``"behavioural"``)."""

    def __init__(
        self, block, params, *, golden, stalls, strict, top, seed=0, log=None, fp_cores="rtl"
    ):
        self.model = build_model(block, params, top=top, log=log, fp_cores=fp_cores)
        super().__init__(
            block,
            params,
            golden=golden,
            stalls=stalls,
            strict=strict,
            latency=self.model.latency,
            initiation_interval=self.model.ii,
        )
        self._in_bytes = 4 * words_of(self.model.in_width)
        self._record_words = words_of(self.model.out_width) + 4
        request_read, self._requests = os.pipe()
        self._answers, answer_write = os.pipe()
        stalls = self.stalls
        try:
            self._process = subprocess.Popen(
                [
                    str(self.model.executable),
                    "--session",
                    str(request_read),
                    str(answer_write),
                    str(seed * 1_000_003 + 1),
                    repr(float(stalls.p_valid)),
                    repr(float(stalls.p_ready)),
                    str(stalls.free_run),
                    str(MAX_IDLE),
                ],
                pass_fds=(request_read, answer_write),
                stdin=subprocess.DEVNULL,
            )
        finally:
            os.close(request_read)
            os.close(answer_write)

    def _write(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self._requests, view) :]

    def _read(self, size):
        parts, left = [], size
        while left:
            chunk = os.read(self._answers, min(left, 1 << 20))
            if not chunk:
                status = self._process.wait()
                raise RuntimeError(
                    f"the fast model `{self.model.top}` ended its session (exit status {status})"
                )
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def _exchange(self, rows, *, outputs, cycles):
        count = 0 if rows is None else len(rows)
        request = struct.pack("<IIIQ", _EXCHANGE, count, outputs, cycles)
        if count:
            request += np.ascontiguousarray(rows, dtype="<u4").tobytes()
        self._write(request)
        status, size, accepted, cycle = struct.unpack("<IIQQ", self._read(24))
        if status:
            raise TimeoutError(self._read(size).decode())
        records = np.frombuffer(self._read(4 * size * self._record_words), dtype="<u4")
        records = records.reshape(size, self._record_words)
        out_words = self._record_words - 4

        def cycles_at(column):
            return records[:, column].astype(np.int64) | (
                records[:, column + 1].astype(np.int64) << 32
            )

        return Exchange(
            records[:, :out_words].astype(np.uint32),
            cycles_at(out_words),
            cycles_at(out_words + 2),
            accepted,
            cycle,
        )

    def _close(self):
        try:
            self._write(struct.pack("<IIIQ", _CLOSE, 0, 0, 0))
        except OSError:
            pass
        os.close(self._requests)
        os.close(self._answers)
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


class _Pipes:
    """A driver process in session mode and its two pipes."""

    def start(self, command):
        request_read, self._requests = os.pipe()
        self._answers, answer_write = os.pipe()
        try:
            self._process = subprocess.Popen(
                [*command, str(request_read), str(answer_write)],
                pass_fds=(request_read, answer_write),
                stdin=subprocess.DEVNULL,
            )
        finally:
            os.close(request_read)
            os.close(answer_write)

    _write = FastSession._write
    _read = FastSession._read

    def stop(self, close_request):
        try:
            self._write(close_request)
        except OSError:
            pass
        os.close(self._requests)
        os.close(self._answers)
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


class FastCycleSession(_Pipes, Session):
    """A :class:`~gpurtl.sim.harness.session.Session` on a cycle-stepped block's compiled model
    (its own ports, :mod:`.cycle`); ``fp_cores`` are its FP32 cores (``"rtl"`` or
    ``"behavioural"``). Each :meth:`apply_all` (or :meth:`apply`) is one round trip."""

    def __init__(self, block, params, *, golden, strict, log=None, fp_cores="rtl"):
        from .cycle import model_of

        self.model = model_of(block, params, fp_cores=fp_cores, log=log)
        super().__init__(block, params, golden=golden, stalls=None, strict=strict)
        self._in_words = words_of(self.model.in_width)
        self._out_words = words_of(self.model.out_width)
        self.start([str(self.model.executable), "--session"])

    def _exchange(self, rows, *, outputs, cycles):
        raise NotImplementedError("a cycle-stepped block is stepped with `apply`")

    def _run_cycles(self, bits):
        if not bits:
            return []
        width = 4 * self._in_words
        data = b"".join(int(value).to_bytes(width, "little") for value in bits)
        self._write(struct.pack("<II", 1, len(bits)) + data)
        answer = self._read(4 * self._out_words * len(bits))
        size = 4 * self._out_words
        return [int.from_bytes(answer[k : k + size], "little") for k in range(0, len(answer), size)]

    def _close(self):
        self.stop(struct.pack("<II", 2, 0))

"""Cycle-stepped golden models of the wait counters and the memory return queues.

They define the behaviour of :mod:`gpurtl.hdl.waitcnt` bit for bit (see the RTL doc strings for
the rules in words). Each model's ``step(inputs) -> outputs`` takes one cycle's input dictionary
(fields as in the block's layouts), returns that cycle's outputs, then advances one clock.
Written as plain Python over lists, independently of the RTL's structure.
:meth:`WaitCountersModel.columns` runs the same rules over many cycles at once, on per-field
columns (the compiled backend's batch check); it equals :meth:`WaitCountersModel.step` cycle by
cycle.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpurtl.facts.waitcnt import MEMORY_DEFAULTS as _D
from gpurtl.facts.waitcnt import SOPK_PREFIX, SOPP_PREFIX, InstClass, Profile, profile

__all__ = ["WaitCountersModel", "ReturnQueueModel", "WaitcntMemoryModel", "decode_wait"]


def decode_wait(prof: Profile, word: int) -> dict[str, int] | None:
    """Thresholds ``{counter: value}`` asked by a wait word (``None`` if the word is unknown).

    Counters the word does not name get their maximum (no constraint); values are clamped to the
    counter maximum (so all-ones "no wait" fields are no constraint).
    """
    word &= 0xFFFFFFFF
    for form in prof.waits:
        if form.fmt == "sopp":
            match = word >> 23 == SOPP_PREFIX and (word >> 16) & 0x7F == form.opcode
        else:
            match = word >> 28 == SOPK_PREFIX and (word >> 23) & 0x1F == form.opcode
        if not match:
            continue
        simm16 = word & 0xFFFF
        asked = {name: prof.max(name) for name in prof.counters}
        for field in form.fields:
            value = field.extract(simm16)
            for name in field.counters:
                asked[name] = min(value, prof.max(name))
        return asked
    return None


class WaitCountersModel:
    """Golden model of :class:`gpurtl.hdl.waitcnt.WaitCounters`."""

    def __init__(
        self,
        generation: str = _D.generation,
        waves: int = _D.waves,
        full_policy: str = _D.full_policy,
        external_returns: bool = True,
    ) -> None:
        self.prof = profile(generation)
        self.waves, self.full_policy, self.external = waves, full_policy, external_returns
        names = self.prof.counters
        self._max = {n: self.prof.max(n) for n in names}
        self.cnt = [{n: 0 for n in names} for _ in range(waves)]
        # count and threshold rows are replaced, never changed in place, so "no wait" rows share
        # one dict and a wave's stall is known while both its rows stay the same objects
        self.thr = [self._max for _ in range(waves)]
        self._known = [(None, None, False)] * waves

    def _stalled(self, w):
        cnt, thr = self.cnt[w], self.thr[w]
        if thr is self._max:  # counts never exceed their maximum: no wait pending
            return False
        known = self._known[w]
        if known[0] is cnt and known[1] is thr:
            return known[2]
        stalled = any(cnt[n] > thr[n] for n in self.prof.counters)
        self._known[w] = (cnt, thr, stalled)
        return stalled

    def step(
        self, inputs: dict[str, Any], *, block: bool = False, returns: Any = None
    ) -> dict[str, Any]:
        """One clock. ``returns`` (internal use) replaces ``inputs["ret"]``; ``block`` refuses the
        issue (a full queue in :class:`WaitcntMemoryModel`)."""
        prof, names = self.prof, self.prof.counters
        issue, wait = inputs["issue"], inputs["wait"]
        rets = returns if returns is not None else inputs["ret"]
        stalled = [self._stalled(w) for w in range(self.waves)]
        stall_bits = sum(1 << w for w in range(self.waves) if stalled[w])
        out: dict[str, Any] = {
            "stall": stall_bits,
            "cnt": list(map(dict, self.cnt)),
            "issue_accepted": 0,
            "err": {"overflow": 0, "bad_wait": 0},
        }
        if self.external:
            out["err"]["underflow"] = {n: 0 for n in names}

        # Issue.
        targets = prof.class_map[InstClass(issue["cls"])] if issue["valid"] else ()
        iw = issue["wave"]
        at_max = any(self.cnt[iw][n] == prof.max(n) for n in targets)
        accept = bool(issue["valid"]) and not block
        if self.full_policy == "stall" and at_max:
            accept = False
        if accept and self.full_policy == "saturate":
            for n in targets:
                same_cycle_return = (
                    rets[n]["valid"] and rets[n]["wave"] == iw and self.cnt[iw][n] != 0
                )
                if self.cnt[iw][n] == prof.max(n) and not same_cycle_return:
                    out["err"]["overflow"] = 1
        out["issue_accepted"] = int(accept)

        # Wait decode.
        asked = decode_wait(prof, wait["word"])
        if wait["valid"] and asked is None:
            out["err"]["bad_wait"] = 1

        # Next state.
        new_cnt = list(self.cnt)
        copied = set()
        for n in names:
            r = rets[n]
            dec_wave = None
            if r["valid"]:
                if self.cnt[r["wave"]][n] == 0:
                    if self.external:
                        out["err"]["underflow"][n] = 1
                else:
                    dec_wave = r["wave"]
            inc_wave = iw if accept and n in targets else None
            if inc_wave == dec_wave:
                continue
            for w, delta in ((inc_wave, 1), (dec_wave, -1)):
                if w is None:
                    continue
                if w not in copied:
                    new_cnt[w] = dict(new_cnt[w])
                    copied.add(w)
                new_cnt[w][n] = (
                    min(self.cnt[w][n] + 1, self._max[n]) if delta > 0 else self.cnt[w][n] - 1
                )
        new_thr = [self.thr[w] if stalled[w] else self._max for w in range(self.waves)]
        if wait["valid"] and asked is not None and 0 <= wait["wave"] < self.waves:
            w = wait["wave"]
            new_thr[w] = {n: min(new_thr[w][n], asked[n]) for n in names}
        self.cnt, self.thr = new_cnt, new_thr
        return out

    def columns(self, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
        """Many clocks at once: the outputs of :meth:`step` cycle by cycle, as columns.

        Parameters
        ----------
        inputs : dict
            One sequence of per-cycle values for each input field, keyed by its dotted path in
            the block's input layout (``"issue.valid"``, ``"wait.word"``, ``"ret.load.wave"``...).

        Returns
        -------
        dict
            One integer array for each output field, keyed by its dotted path (``"stall"``,
            ``"cnt[3].load"``, ``"err.underflow.km"``...). The state carries over, as with
            :meth:`step`, before and after.
        """
        prof, names, waves = self.prof, self.prof.counters, self.waves
        size = len(names)
        maxes = [self._max[n] for n in names]
        position = {n: k for k, n in enumerate(names)}
        targets_of = {
            int(c.value): tuple(position[n] for n in prof.class_map[c]) for c in InstClass
        }

        def column(path):
            return np.asarray(inputs[path]).tolist()

        i_valid, i_wave, i_cls = column("issue.valid"), column("issue.wave"), column("issue.cls")
        w_valid, w_wave, w_word = column("wait.valid"), column("wait.wave"), column("wait.word")
        r_valid = [column(f"ret.{n}.valid") for n in names]
        r_wave = [column(f"ret.{n}.wave") for n in names]
        cycles = len(i_valid)
        # the counts as one flat list (wave-major); the count outputs are rebuilt afterwards
        # from the changes, so a cycle records only what it changes
        cnt = [c[n] for c in self.cnt for n in names]
        start = np.array(cnt, dtype=np.int64)
        # threshold tuples of the waves with a wait pending; every other wave has no constraint
        waiting = {
            w: tuple(self.thr[w][n] for n in names)
            for w in range(waves)
            if self.thr[w] is not self._max
        }

        def stalled(w, thr):
            base = w * size
            for k in range(size):
                if cnt[base + k] > thr[k]:
                    return True
            return False

        bits = 0
        for w, thr in waiting.items():
            if stalled(w, thr):
                bits |= 1 << w
        stall = [0] * cycles
        accepted = [0] * cycles
        overflow = [0] * cycles
        bad_wait = [0] * cycles
        underflow = [[0] * cycles for _ in names]
        # each change of a count, as one int: (cycle * counts + index) * 2 + (1: up, 0: down)
        changes: list[int] = []
        stride = waves * size
        decoded: dict[int, tuple | None] = {}
        stall_policy = self.full_policy == "stall"
        saturate = self.full_policy == "saturate"
        external = self.external
        # the counters a cycle may change: those with a return, and the issue's when accepted
        returning_bits = np.zeros(cycles, dtype=np.int64)
        for k in range(size):
            returning_bits |= (np.asarray(r_valid[k], dtype=np.int64) != 0).astype(np.int64) << k
        returning = returning_bits.tolist()
        mask_of = {cls: sum(1 << k for k in ks) for cls, ks in targets_of.items()}
        bits_of = [[k for k in range(size) if m >> k & 1] for m in range(1 << size)]
        # per cycle: 0 without an issue, else 1 + the mask of the counters the issue bumps
        issue_code = []
        for valid, cls in zip(i_valid, i_cls):
            if not valid:
                issue_code.append(0)
            elif cls in mask_of:
                issue_code.append(mask_of[cls] + 1)
            else:
                InstClass(cls)  # the error of an unknown class, as in step
                raise ValueError(f"{cls} is not a valid InstClass")
        record = changes.append
        for t in range(cycles):
            stall[t] = bits
            target_mask = 0
            iw = i_wave[t]
            code = issue_code[t]
            if code:
                accept = True
                base = iw * size
                if stall_policy:
                    for k in bits_of[code - 1]:
                        if cnt[base + k] == maxes[k]:
                            accept = False
                            break
                if accept:
                    accepted[t] = 1
                    target_mask = code - 1
                    if saturate:
                        for k in bits_of[target_mask]:
                            value = cnt[base + k]
                            same_cycle_return = r_valid[k][t] and r_wave[k][t] == iw and value
                            if value == maxes[k] and not same_cycle_return:
                                overflow[t] = 1
            touched = []
            ret_mask = returning[t]
            for k in bits_of[ret_mask | target_mask]:
                dec = -1
                if ret_mask >> k & 1:
                    rw = r_wave[k][t]
                    if cnt[rw * size + k] == 0:
                        if external:
                            underflow[k][t] = 1
                    else:
                        dec = rw
                inc = iw if target_mask >> k & 1 else -1
                if inc == dec:
                    continue
                if inc >= 0:
                    j = inc * size + k
                    if cnt[j] < maxes[k]:
                        cnt[j] += 1
                        record(((t * stride + j) << 1) | 1)
                    touched.append(inc)
                if dec >= 0:
                    j = dec * size + k
                    cnt[j] -= 1
                    record((t * stride + j) << 1)
                    touched.append(dec)
            # a wave's wait ends once it does not stall; a new wait tightens the thresholds
            if waiting and bits.bit_count() != len(waiting):
                waiting = {w: thr for w, thr in waiting.items() if bits >> w & 1}
                touched.append(-1)  # the stall bits change
            if w_valid[t]:
                word = w_word[t]
                if word in decoded:
                    asked = decoded[word]
                else:
                    found = decode_wait(prof, word)
                    asked = None if found is None else tuple(found[n] for n in names)
                    decoded[word] = asked
                if asked is None:
                    bad_wait[t] = 1
                elif 0 <= w_wave[t] < waves:
                    ww = w_wave[t]
                    waiting[ww] = tuple(map(min, waiting.get(ww, maxes), asked))
                    touched.append(ww)
            if touched:
                bits = 0
                for w, thr in waiting.items():
                    # an unchanged wave still waiting was stalled at the start of this cycle
                    if w not in touched or stalled(w, thr):
                        bits |= 1 << w
        self.cnt = [dict(zip(names, cnt[w * size : (w + 1) * size])) for w in range(waves)]
        self.thr = [
            dict(zip(names, waiting[w])) if w in waiting else self._max for w in range(waves)
        ]
        self._known = [(None, None, False)] * waves

        # one row per counter, so that the running sums run along contiguous memory
        deltas = np.zeros((stride, cycles), dtype=np.int64)
        if changes:
            packed = np.asarray(changes, dtype=np.int64)
            at_cycle, index = np.divmod(packed >> 1, stride)
            keep = at_cycle + 1 < cycles
            deltas[index[keep], at_cycle[keep] + 1] = (packed[keep] & 1) * 2 - 1
        counts = np.cumsum(deltas, axis=1) + start[:, None]
        out = {
            "stall": np.array(stall, dtype=np.int64),
            "issue_accepted": np.array(accepted, dtype=np.int64),
        }
        for w in range(waves):
            for k, n in enumerate(names):
                out[f"cnt[{w}].{n}"] = counts[w * size + k]
        out["err.overflow"] = np.array(overflow, dtype=np.int64)
        out["err.bad_wait"] = np.array(bad_wait, dtype=np.int64)
        if external:
            for k, n in enumerate(names):
                out[f"err.underflow.{n}"] = np.array(underflow[k], dtype=np.int64)
        return out


class ReturnQueueModel:
    """Golden model of :class:`gpurtl.hdl.waitcnt.ReturnQueue` (ages instead of timestamps)."""

    def __init__(
        self,
        depth: int = _D.queue_depth,
        order: str = "inorder",
        hit_latency: int = _D.hit_latency,
        miss_latency: int = _D.miss_latency,
    ) -> None:
        self.depth, self.order = depth, order
        self.hit_latency, self.miss_latency = hit_latency, miss_latency
        self.entries: list[list[int]] = []  # oldest first: [wave, latency, age]

    @property
    def full(self):
        return len(self.entries) == self.depth

    def peek(self):
        """Index of the entry that leaves this cycle, or ``None``."""
        if self.order == "inorder":
            if self.entries and self.entries[0][2] >= self.entries[0][1]:
                return 0
            return None
        seen = set()
        for index, (wave, latency, age) in enumerate(self.entries):
            if wave not in seen and age >= latency:
                return index
            seen.add(wave)
        return None

    def ready_in(self):
        """Clocks until the first entry could leave (0: one may leave this clock), ``None`` when
        the queue is empty. Before then every :meth:`step` without a push only ages the entries,
        which :meth:`idle` does at once."""
        if not self.entries:
            return None
        return max(0, min(latency - age for _wave, latency, age in self.entries))

    def idle(self, clocks):
        """``clocks`` steps without a push in which no entry leaves (at most :meth:`ready_in`)."""
        ready = self.ready_in()
        if ready is not None and clocks > ready:
            raise ValueError(f"an entry can leave within {ready} clocks, not {clocks}")
        for entry in self.entries:
            entry[2] += clocks

    def step(self, push_wave=None, push_hit=0, latency=None):
        """One clock: returns the leaving ``{"valid", "wave"}``; pushes a request if given.

        ``latency`` replaces the hit/miss latency of the pushed request (a timing model that
        computes each request's latency itself, such as :mod:`gpurtl.golden.cu`)."""
        index = self.peek()
        out = {"valid": 0, "wave": 0}
        if index is not None:
            out = {"valid": 1, "wave": self.entries[index][0]}
        was_full = self.full
        if index is not None:
            del self.entries[index]
        for entry in self.entries:
            entry[2] += 1
        if push_wave is not None and not was_full:
            if latency is None:
                latency = self.hit_latency if push_hit else self.miss_latency
            self.entries.append([push_wave, latency, 1])
        return out


class WaitcntMemoryModel:
    """Golden model of :class:`gpurtl.hdl.waitcnt.WaitcntMemory`."""

    def __init__(
        self,
        generation: str = _D.generation,
        waves: int = _D.waves,
        full_policy: str = _D.full_policy,
        queue: str = _D.queue,
        queue_depth: int = _D.queue_depth,
        hit_latency: int = _D.hit_latency,
        miss_latency: int = _D.miss_latency,
    ) -> None:
        self.counters = WaitCountersModel(generation, waves, full_policy, external_returns=False)
        self.prof = self.counters.prof
        self.queues = {
            n: ReturnQueueModel(queue_depth, queue, hit_latency, miss_latency)
            for n in self.prof.counters
        }

    def step(self, inputs: dict[str, Any]) -> dict[str, Any]:
        issue = inputs["issue"]
        targets = self.prof.class_map[InstClass(issue["cls"])] if issue["valid"] else ()
        blocked = any(self.queues[n].full for n in targets)
        returns = {}
        for n, queue in self.queues.items():
            index = queue.peek()
            returns[n] = (
                {"valid": 0, "wave": 0}
                if index is None
                else {"valid": 1, "wave": queue.entries[index][0]}
            )
        out = self.counters.step(inputs, block=blocked, returns=returns)
        accepted = out["issue_accepted"]
        for n, queue in self.queues.items():
            push = accepted and n in targets
            queue.step(issue["wave"] if push else None, issue["hit"])
        return {
            "stall": out["stall"],
            "issue_accepted": accepted,
            "cnt": out["cnt"],
            "ret": returns,
            "err": out["err"],
        }

"""Cycle-stepped golden models of the software scoreboard tokens (Intel Gen12+ SBID).

They define the behaviour of :mod:`gpurtl.hdl.sbid` bit for bit (the rules in words are in
:mod:`gpurtl.hdl.sbid.tokens`). Each model's ``step(inputs) -> outputs`` takes one cycle's input
dictionary (fields as in the block's layouts), returns that cycle's outputs, then advances one
clock. Plain Python over integer bit masks, written independently of the RTL's structure.
"""

__all__ = ["SbidTokensModel", "SbidMemoryModel", "lowest_free"]


def lowest_free(busy, tokens):
    """Index of the lowest clear bit of ``busy`` below ``tokens``, or ``None``."""
    for k in range(tokens):
        if not (busy >> k) & 1:
            return k
    return None


class SbidTokensModel:
    """Golden model of :class:`gpurtl.hdl.sbid.SbidTokens`."""

    def __init__(self, threads=8, tokens=16, *, external_returns=True):
        self.threads, self.tokens, self.external = threads, tokens, external_returns
        self.busy = [0] * threads
        self.pend = [0] * threads
        self.seen = [0] * threads

    def _issue(self, issue):
        """``(accepted, token, set_busy)`` of this cycle's send."""
        t = issue["thread"]
        if not issue["valid"] or t >= self.threads:
            return False, 0, False
        if issue["alloc"]:
            token = lowest_free(self.busy[t], self.tokens)
            return (token is not None), (token or 0), False
        token = issue["sbid"]
        if (self.busy[t] >> token) & 1:
            return False, 0, True
        return True, token, False

    def step(self, inputs, *, clear=None):
        """One clock. ``clear`` (internal use): per thread, the mask of tokens whose request
        returns this cycle, replacing ``inputs["ret"]``."""
        issue, wait = inputs["issue"], inputs["wait"]
        full = (1 << self.tokens) - 1
        out = {
            "stall": sum(1 << t for t in range(self.threads) if self.pend[t]),
            "busy": list(self.busy),
        }
        accepted, token, set_busy = self._issue(issue)
        out["issue_accepted"] = int(accepted)
        out["issue_sbid"] = token
        err = {"set_busy": int(set_busy), "wait_unset": 0}

        sets = [0] * self.threads
        if accepted:
            sets[issue["thread"]] = 1 << token
        if clear is None:
            clear = [0] * self.threads
            ret = inputs["ret"]
            err["ret_idle"] = 0
            if ret["valid"] and ret["thread"] < self.threads:
                bit = 1 << ret["sbid"]
                if self.busy[ret["thread"]] & bit:
                    clear[ret["thread"]] = bit
                else:
                    err["ret_idle"] = 1
        wt = wait["thread"]
        waiting = bool(wait["valid"]) and wt < self.threads
        if waiting and wait["mask"] & full & ~(self.seen[wt] | sets[wt]):
            err["wait_unset"] = 1
        out["err"] = err

        for t in range(self.threads):
            busy = (self.busy[t] & ~clear[t]) | sets[t]
            pend = self.pend[t] & ~clear[t]
            if waiting and t == wt:
                pend |= wait["mask"] & busy
            self.busy[t], self.pend[t] = busy, pend
            self.seen[t] |= sets[t]
        return out


class SbidMemoryModel:
    """Golden model of :class:`gpurtl.hdl.sbid.SbidMemory`: tokens behind a hit/miss latency
    model in which every request returns on its own (out of order)."""

    def __init__(self, threads=8, tokens=16, hit_latency=20, miss_latency=200):
        self.tokens_model = SbidTokensModel(threads, tokens, external_returns=False)
        self.threads, self.tokens = threads, tokens
        self.hit_latency, self.miss_latency = hit_latency, miss_latency
        # clocks left before each in-flight request returns (meaningful while its token is busy)
        self.left = [[0] * tokens for _ in range(threads)]

    def step(self, inputs):
        busy = list(self.tokens_model.busy)
        clear = [
            sum(1 << k for k in range(self.tokens) if (busy[t] >> k) & 1 and self.left[t][k] == 0)
            for t in range(self.threads)
        ]
        out = self.tokens_model.step(inputs, clear=clear)
        for t in range(self.threads):
            for k in range(self.tokens):
                if (busy[t] >> k) & 1 and self.left[t][k]:
                    self.left[t][k] -= 1
        if out["issue_accepted"]:
            latency = self.hit_latency if inputs["issue"]["hit"] else self.miss_latency
            self.left[inputs["issue"]["thread"]][out["issue_sbid"]] = latency - 1
        out["ret"] = clear
        return out

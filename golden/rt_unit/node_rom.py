"""Cycle-stepped golden model of the node memory on the board (:mod:`gpurtl.hdl.rt_unit.node_rom`).

Rules (one clock per :meth:`NodeRomModel.step`):

* One request at a time: ``mem_req.ready`` is high while no request is held, and in the cycle
  the held fill is taken.
* A request taken in cycle ``t`` is offered as a fill (``line``, ``data``) from cycle
  ``t + latency`` until it is taken.
* ``data`` is line ``line`` of the image, or zero for a line outside it; ``err.range`` is high
  in the cycle such a request is taken.

While ``fill.valid`` is low the fill's payload is not defined (the model gives ``None``).
"""

__all__ = ["NodeRomModel"]


class NodeRomModel:
    """Golden model of :class:`~gpurtl.hdl.rt_unit.node_rom.NodeRom`.

    Parameters
    ----------
    image : list of int
        1024-bit lines, line 0 first.
    latency : int
        Cycles from a request taken to its fill offered (at least 1).
    """

    def __init__(self, image, latency=1):
        if latency < 1:
            raise ValueError(f"`latency` must be at least 1, not {latency!r}")
        self.image, self.latency = list(image), latency
        self.held = None  # [line, cycles until offered]

    def step(self, inputs):
        """``inputs``: ``{"mem_req": {"valid", "payload": {"line"}}, "fill": {"ready"}}``;
        returns ``{"mem_req": {"ready"}, "fill": {"valid", "payload"}, "err": {"range"}}``."""
        offered = self.held is not None and self.held[1] == 0
        done = offered and bool(inputs["fill"]["ready"])
        ready = self.held is None or done
        payload = None
        if offered:
            line = self.held[0]
            data = self.image[line] if line < len(self.image) else 0
            payload = {"line": line, "data": data}
        take = ready and bool(inputs["mem_req"]["valid"])
        line = inputs["mem_req"]["payload"]["line"]
        outputs = {
            "mem_req": {"ready": int(ready)},
            "fill": {"valid": int(offered), "payload": payload},
            "err": {"range": int(take and line >= len(self.image))},
        }
        if self.held is not None and self.held[1]:
            self.held[1] -= 1
        if done:
            self.held = None
        if take:
            self.held = [line, self.latency - 1]
        return outputs

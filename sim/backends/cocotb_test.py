"""The generic cocotb test: drives any registered block's exported Verilog with the same driver
coroutines as the Amaranth backend and compares against the golden outputs.

It reads its job (block, parameters, input and expected bit patterns or the count and seed of a
random run, stall pattern) from the JSON file named by ``$GPURTL_JOB`` and writes a
:class:`gpurtl.sim.harness.lockstep.Report` as JSON; the parent process reads the report's counts.
"""

import json
import os
import traceback

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer

from gpurtl.sim.core import registry
from gpurtl.sim.harness.engine import PortIO, StallPattern
from gpurtl.sim.harness.lockstep import compare_events, drive_block, random_stream


class CocotbIO(PortIO):
    def __init__(self, dut):
        self._dut = dut
        self._handles = {}

    def _handle(self, name):
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = getattr(self._dut, name)
        return handle

    def set(self, name, value):
        self._handle(name).value = value

    def get(self, name):
        value = self._handle(name).value
        # 1-bit ports read as `Logic`, wider ones as `LogicArray`.
        return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)

    async def settle(self):
        await Timer(1, unit="ns")

    async def tick(self):
        await RisingEdge(self._dut.clk)


@cocotb.test()
async def lockstep(dut):
    job = json.loads(open(os.environ["GPURTL_JOB"]).read())
    result = {}
    try:
        block = registry.get(job["block"])
        params = job["params"]
        if job.get("generate"):
            # The same chunked generator as the Amaranth backend: memory stays flat.
            inputs, expected = random_stream(
                block, params, job["generate"]["count"], job["generate"]["seed"]
            )
        else:
            inputs = [int(text, 16) for text in job["inputs"]]
            expected = None if job["expected"] is None else [int(t, 16) for t in job["expected"]]
        Clock(dut.clk, 10, unit="ns").start()
        dut.rst.value = 1
        await RisingEdge(dut.clk)
        await RisingEdge(dut.clk)
        dut.rst.value = 0
        latency = (
            registry.component_facts(lambda: block.build(**params), lambda rtl: rtl.latency)
            if block.kind == "pipeline"
            else None
        )
        report, on_output = compare_events(
            block, params, expected, latency=latency, keep_outputs=job["keep_outputs"]
        )
        await drive_block(
            block, CocotbIO(dut), inputs, StallPattern(**job["stalls"]), report, on_output
        )
        result = report.to_json()
    except Exception as error:  # reported to the parent process, which prints it
        result = {"error": f"{error}\n{traceback.format_exc()}"}
    with open(job["result"], "w") as file:
        json.dump(result, file)
    assert "error" not in result, result.get("error")

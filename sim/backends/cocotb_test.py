"""The generic cocotb test: drives any registered block's exported Verilog with the drivers of
:mod:`gpurtl.sim.harness.engine`, inside the simulator process.

It reads its job from the JSON file named by ``$GPURTL_JOB``:

``"mode": "batch"``
    Input and expected bit patterns, or the count and seed of a random run that is generated
    here chunk by chunk, and a stall pattern; the test compares against the golden outputs and
    writes a :class:`gpurtl.sim.harness.report.Report` as JSON to the job's ``result`` file.
``"mode": "session"``
    The test connects to the Unix socket ``socket`` of the calling process and serves a
    :class:`gpurtl.sim.backends.verilator.VerilatorSession`: one JSON line per request (push input
    rows and run until enough outputs came out; apply cycles; close), one JSON line per answer.
"""

import json
import os
import socket
import traceback

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

from gpurtl.sim.backends.cocotb_io import INPUTS, OUTPUTS, CocotbIO
from gpurtl.sim.core import registry
from gpurtl.sim.harness.engine import PipelineDriver, Source, StallPattern, UndefinedValue
from gpurtl.sim.harness.golden_io import random_stream
from gpurtl.sim.harness.lockstep import compare_events, drive_block, timing_facts


async def _reset(dut, block):
    for name in INPUTS[block.kind]:
        getattr(dut, name).value = 0
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 1
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    dut.rst.value = 0


def _io(dut, job, block):
    """The ports; with the job's ``all_outputs``, every output is read in every cycle."""
    return CocotbIO(dut, OUTPUTS[block.kind] if job.get("all_outputs") else ())


async def _batch(dut, job, block, params):
    stalls = StallPattern(**job["stalls"])
    if job.get("generate"):
        # The same chunked generator as the Amaranth backend: memory stays flat.
        inputs, expected = random_stream(
            block, params, job["generate"]["count"], job["generate"]["seed"]
        )
    else:
        inputs = [int(text, 16) for text in job["inputs"]]
        expected = None if job["expected"] is None else [int(t, 16) for t in job["expected"]]
    await _reset(dut, block)
    latency, ii = timing_facts(block, params)
    report, on_output = compare_events(
        block,
        params,
        expected,
        latency=latency,
        ii=ii,
        keep_outputs=job["keep_outputs"],
        free_run=stalls.free_run,
    )
    await drive_block(block, _io(dut, job, block), inputs, stalls, report, on_output)
    return report.to_json()


class _Queue(Source):
    def __init__(self):
        self.items = []

    def next(self, cycle):
        return self.items.pop(0) if self.items else None


async def _serve(dut, job, block, params):
    """Answer the requests of the calling process's session until it closes."""
    await _reset(dut, block)
    io = _io(dut, job, block)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(job["socket"])
    stream = connection.makefile("rw")
    queue = _Queue()
    driver = (
        PipelineDriver(queue, StallPattern(**job["stalls"])) if block.kind == "pipeline" else None
    )
    if driver is not None:
        driver.start(io)
    cycle = 0
    while True:
        line = stream.readline()
        if not line:
            break
        request = json.loads(line)
        try:
            if request["op"] == "close":
                stream.write(json.dumps({"closed": True}) + "\n")
                stream.flush()
                break
            if request["op"] == "exchange":
                queue.items += [int(text, 16) for text in request["rows"]]
                events = []
                driver.on_output = events.append
                start = driver.cycle
                while len(events) < request["outputs"] or driver.cycle - start < request["cycles"]:
                    driver.drive(io)
                    await io.settle()
                    driver.observe(io)
                    await io.tick()
                answer = {
                    "outputs": [[f"{e.bits:x}", e.accept_cycle, e.emit_cycle] for e in events],
                    "accepted": driver.sent,
                    "cycle": driver.cycle,
                }
            else:  # cycles
                outputs = []
                for text in request["rows"]:
                    io.set("i", int(text, 16))
                    await io.settle()
                    outputs.append(f"{io.get('o'):x}")
                    await io.tick()
                    cycle += 1
                answer = {"outputs": outputs, "cycle": cycle}
        except UndefinedValue as error:  # the session raises it, with the block's name
            answer = {"error": str(error), "type": "UndefinedValue", "undefined": error.to_json()}
        except Exception as error:  # the session raises it in the calling process
            answer = {"error": f"{type(error).__name__}: {error}", "type": type(error).__name__}
        stream.write(json.dumps(answer) + "\n")
        stream.flush()
    connection.close()
    return {"closed": True}


@cocotb.test()
async def run(dut):
    with open(os.environ["GPURTL_JOB"]) as file:
        job = json.load(file)
    try:
        block = registry.get(job["block"])
        params = job["params"]
        serve = _serve if job["mode"] == "session" else _batch
        result = await serve(dut, job, block, params)
    except UndefinedValue as error:  # the parent process names the block and the field
        result = {"undefined": error.to_json()}
    except Exception as error:  # reported to the parent process, which prints it
        result = {"error": f"{error}\n{traceback.format_exc()}"}
    with open(job["result"], "w") as file:
        json.dump(result, file)
    assert "error" not in result, result.get("error")

"""cocotb test that plays the host on the UART lines of an exported harness
(:func:`gpurtl.sim.tools.board.drive_uart`).

It reads its job (bytes to send with idle gaps, bit divisor, bytes to expect) from the JSON file
named by ``$GPURTL_JOB`` and writes the received bytes, as hex, to the job's result file.
"""

import json
import os
import traceback

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

from gpurtl.sim.backends.cocotb_io import CocotbIO
from gpurtl.sim.tools.board import drive_uart


@cocotb.test()
async def uart_session(dut):
    job = json.loads(open(os.environ["GPURTL_JOB"]).read())
    try:
        Clock(dut.clk, 10, unit="ns").start()
        dut.rx.value = 1
        dut.rst.value = 1
        await RisingEdge(dut.clk)
        await RisingEdge(dut.clk)
        dut.rst.value = 0
        chunks = [(bytes.fromhex(data), idle) for data, idle in job["chunks"]]
        received = await drive_uart(
            CocotbIO(dut),
            chunks,
            job["divisor"],
            expect=job["expect"],
            max_cycles=job["max_cycles"],
        )
        result = {"received": received.hex()}
    except Exception as error:  # reported to the parent process, which raises it
        result = {"error": f"{error}\n{traceback.format_exc()}"}
    with open(job["result"], "w") as file:
        json.dump(result, file)
    assert "error" not in result, result.get("error")

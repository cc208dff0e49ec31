"""The ``sim`` command serves in the foreground and stops cleanly on Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
import trio
from click.testing import CliRunner

from forge_rt.backends.sim._cli import sim_command

LAUNCH = "from forge_rt.backends.sim._cli import sim_command; sim_command()"


class _Sim:
    """A ``forge-rt sim`` child process, started; what it printed so far in ``output``."""

    def __init__(self, process: trio.Process, url: str, output: bytes) -> None:
        self.process = process
        self.url = url
        self.output = output

    async def interrupt(self) -> None:
        """SIGINT, then read what it prints until it exits."""
        assert self.process.stdout is not None
        self.process.send_signal(signal.SIGINT)
        while chunk := await self.process.stdout.receive_some():
            self.output += chunk
        await self.process.wait()


@asynccontextmanager
async def _sim(*args: str) -> AsyncIterator[_Sim]:
    """The sim command with ``args``, once it printed its URL; killed if still running after."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", LAUNCH, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    output = b""
    try:
        while b"(Ctrl-C stops it)" not in output:
            output += await process.stdout.receive_some()
        url = output.decode().split(" at ")[1].split(" ")[0]
        yield _Sim(process, url, output)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.stdout.aclose()


async def _in_flight(http: httpx.AsyncClient) -> float:
    """The sim's count of inference requests being served, from its /metrics."""
    text = (await http.get("/metrics")).text
    [line] = [x for x in text.splitlines() if x.startswith("forge_sim:requests_in_flight ")]
    return float(line.split()[1])


async def test_sim_command_serves_until_interrupted() -> None:
    """It prints the URL, answers on it, and exits 0 on SIGINT."""
    with trio.fail_after(60):
        async with _sim("--model", "cli-model", "--rate", "hermes=1") as sim:
            async with httpx.AsyncClient(base_url=sim.url) as http:
                models = (await http.get("/v1/models")).json()
            await sim.interrupt()
    assert models["data"][0]["id"] == "cli-model"
    assert sim.process.returncode == 0
    assert sim.output.decode().endswith("sim stopped\n")


def test_bad_rate_is_a_usage_error() -> None:
    """An unknown dialect in ``--rate`` is refused with the list of known ones."""
    result = CliRunner().invoke(sim_command, ["--rate", "nonsense=0.5"])
    assert result.exit_code == 2
    assert "'nonsense=0.5' is not NAME=PROBABILITY with NAME one of: bare_json" in result.output


async def test_sim_command_stops_on_sigint_with_requests_hanging_in_it() -> None:
    """Every request hangs (``--fault-rate hang=1``); SIGINT still stops it, exit 0."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    cut: list[bool] = []
    with trio.fail_after(60):
        async with (
            _sim("--fault-rate", "hang=1") as sim,
            httpx.AsyncClient(base_url=sim.url, timeout=30) as http,
            trio.open_nursery() as nursery,
        ):

            async def hang() -> None:
                with pytest.raises(httpx.RemoteProtocolError):  # the server went away
                    await http.post("/v1/chat/completions", json=body)
                cut.append(True)

            for _ in range(4):
                nursery.start_soon(hang)
            async with httpx.AsyncClient(base_url=sim.url) as probe:
                # Another process's state: no event to wait on, so its /metrics is polled
                # (within the test's fail_after) until the four requests are in, hanging.
                while await _in_flight(probe) < 4:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            await sim.interrupt()
    assert sim.process.returncode == 0
    assert cut == [True] * 4

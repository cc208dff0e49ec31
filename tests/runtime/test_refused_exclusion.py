"""A call that would be refused again stays out of the next constrained request
(``GuardrailOptions(exclude_refused=True)``; off by default, as measured): the stuck model has
to write another.
Tested over HTTP on the sim, whose oracle plays a model that sends its first choice for as long
as the request's schema admits it -- what the real 0.5B did with a placeholder path and with a
symbol the tool had refused.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from runtime_support import admits

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.backends.sim._view import RequestView
from forge_rt.clients import LlamaServerClient
from forge_rt.core import ToolDef, ToolSpec, Workflow
from forge_rt.errors import ToolCallError, ToolResolutionError
from forge_rt.eval.scenarios._kit import call, successful_results
from forge_rt.guardrails import GuardrailOptions
from forge_rt.runtime import WorkflowRunner

PATH = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
SYMBOL = {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}
PLACEHOLDER = "/path/to/your/file"
ON = GuardrailOptions(exclude_refused=True)


class Files:
    def __init__(self) -> None:
        self.read: list[str] = []

    async def read_file(self, path: str) -> str:
        self.read.append(path)
        return "v2 ships on 2027-03-01"

    def workflow(self) -> Workflow:
        spec = ToolSpec(name="read_file", parameters=PATH)
        return Workflow(
            name="files",
            tools=[ToolDef(spec=spec, callable=self.read_file)],
            required_steps=["read_file"],
            system_prompt_template="Answer from the user's files.",
            constrain="always",
        )


class Quotes:
    def __init__(self) -> None:
        self.symbols: list[str] = []

    async def get_stock_price(self, symbol: str) -> str:
        self.symbols.append(symbol)
        if symbol != "ACME":
            raise ToolResolutionError(f"unknown symbol {symbol!r}; try ACME")
        return "ACME: 412.30"

    def workflow(self) -> Workflow:
        spec = ToolSpec(name="get_stock_price", parameters=SYMBOL)
        return Workflow(
            name="quotes",
            tools=[ToolDef(spec=spec, callable=self.get_stock_price)],
            required_steps=["get_stock_price"],
            system_prompt_template="Answer stock questions.",
            constrain="always",
        )


def placeholder_writer(schemas: list[dict[str, Any]]) -> Any:
    """A model that writes the documentation's placeholder path while it may."""

    def oracle(view: RequestView) -> Any:
        assert view.schema is not None
        schemas.append(view.schema)
        if successful_results(view):
            return call("respond", message="v2 ships on 2027-03-01.")
        path = PLACEHOLDER if admits(view.schema, "read_file", "path", PLACEHOLDER) else "/notes"
        return call("read_file", path=path)

    return oracle


async def test_a_refused_placeholder_is_excluded_from_the_next_reply() -> None:
    """The placeholder is refused once; the 2nd request no longer admits it (other paths it
    does) and the run finishes with the real path read."""
    schemas: list[dict[str, Any]] = []
    files = Files()
    with trio.fail_after(30):
        async with (
            SimBackend.serve(SimConfig(oracle=placeholder_writer(schemas))) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            runner = WorkflowRunner(client, guardrails=ON)
            result = await runner.run(files.workflow(), "When does v2 ship?")
    assert result.output == "v2 ships on 2027-03-01."
    assert files.read == ["/notes"]
    assert [admits(s, "read_file", "path", PLACEHOLDER) for s in schemas[:2]] == [True, False]
    assert all(admits(s, "read_file", "path", "/notes") for s in schemas[:2])


async def test_by_default_the_placeholder_stays_admitted_and_retries_run_out() -> None:
    schemas: list[dict[str, Any]] = []
    options = GuardrailOptions()
    with trio.fail_after(30):
        async with (
            SimBackend.serve(SimConfig(oracle=placeholder_writer(schemas))) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            runner = WorkflowRunner(client, guardrails=options)
            with pytest.raises(ToolCallError):
                await runner.run(Files().workflow(), "When does v2 ship?")
    assert all(admits(s, "read_file", "path", PLACEHOLDER) for s in schemas)


async def test_a_symbol_the_tool_refused_is_excluded_until_it_resolves() -> None:
    """The tool refuses AAPL; the next request does not admit AAPL, the model's second choice
    (the hinted ACME) runs, and the answer follows."""
    schemas: list[dict[str, Any]] = []

    def oracle(view: RequestView) -> Any:
        assert view.schema is not None
        schemas.append(view.schema)
        if successful_results(view):
            return call("respond", message="ACME trades at 412.30.")
        admitted = admits(view.schema, "get_stock_price", "symbol", "AAPL")
        return call("get_stock_price", symbol="AAPL" if admitted else "ACME")

    quotes = Quotes()
    with trio.fail_after(30):
        async with (
            SimBackend.serve(SimConfig(oracle=oracle)) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            runner = WorkflowRunner(client, guardrails=ON)
            result = await runner.run(quotes.workflow(), "What's ACME at?")
    assert result.output == "ACME trades at 412.30."
    assert quotes.symbols == ["AAPL", "ACME"]
    assert [admits(s, "get_stock_price", "symbol", "AAPL") for s in schemas[:2]] == [True, False]

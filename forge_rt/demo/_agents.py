"""The demo's four agents: three background specialists and a voice assistant, with their tools.

Every tool is deterministic (fixed tables, plain arithmetic), so a run is judged by what the
model did, not by what the tools happened to return. A tool that is called wrong raises
:class:`~forge_rt.errors.ToolResolutionError` with the fix in its message; the guardrails feed it
back to the model. Each agent knows its *plan* -- the calls a perfect model makes -- which the
simulated backend follows (and renders wrongly at small-model rates) and the tests check against.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
import trio

from forge_rt.core import ConstrainMode, ToolDef, ToolSpec, Workflow
from forge_rt.errors import ToolResolutionError

__all__ = ["AGENTS", "IDLE_VOICE", "AgentSpec", "PlannedCall", "ToolHook", "agent_by_task"]

# Called with (agent name, tool name) when a tool starts running; the live view shows it.
ToolHook = Callable[[str, str], None]


class PlannedCall(msgspec.Struct, frozen=True):
    """One step of an agent's plan: a tool and the arguments a perfect model passes."""

    tool: str
    args: dict[str, Any]


class _Tool(msgspec.Struct, frozen=True):
    """A tool of a demo agent: its name, description, parameters and function."""

    name: str
    description: str
    params: dict[str, tuple[str, str]]  # name -> (JSON type, description)
    fn: Callable[..., str]

    def spec(self) -> ToolSpec:
        """The tool's spec: every parameter required, each with a description."""
        schema = {
            "type": "object",
            "properties": {k: {"type": t, "description": d} for k, (t, d) in self.params.items()},
            "required": list(self.params),
        }
        return ToolSpec(name=self.name, description=self.description, parameters=schema)


class AgentSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One demo agent: who it is, what it is asked, its tools and the plan a perfect model follows.

    ``plan`` ends with the ``respond`` call whose message is the ideal answer.
    """

    name: str
    role: str
    task: str
    prompt: str
    tools: tuple[_Tool, ...]
    plan: tuple[PlannedCall, ...]
    terminal: str | None = None
    background: bool = True

    def workflow(
        self,
        *,
        tool_seconds: float = 0.0,
        on_tool: ToolHook | None = None,
        constrain: ConstrainMode = "auto",
    ) -> Workflow:
        """The agent's workflow; each tool takes ``tool_seconds`` (its simulated I/O time).

        Every tool but the terminal one is a required step, so the agent cannot finish before
        it has looked things up. With ``terminal`` unset the synthetic ``respond`` tool ends the
        run; otherwise that tool does and ``respond`` is not offered (a background specialist
        files its result, it does not talk to a user). ``constrain`` is the workflow's
        constrained-decoding mode.
        """
        if tool_seconds < 0:
            raise ValueError(f"tool_seconds must be >= 0, got {tool_seconds!r}")
        defs = [
            ToolDef(spec=tool.spec(), callable=_timed(self.name, tool, tool_seconds, on_tool))
            for tool in self.tools
        ]
        return Workflow(
            name=self.name,
            description=self.role,
            tools=defs,
            required_steps=[t.name for t in self.tools if t.name != self.terminal],
            terminal_tool=self.terminal,
            respond_tool=self.terminal is None,
            system_prompt_template=self.prompt,
            constrain=constrain,
        )

    def expected_results(self) -> tuple[str, ...]:
        """What each tool step of the plan returns (the tools are deterministic)."""
        by_name = {t.name: t for t in self.tools}
        return tuple(by_name[c.tool].fn(**c.args) for c in self.plan if c.tool in by_name)


def _timed(
    agent: str, tool: _Tool, seconds: float, on_tool: ToolHook | None
) -> Callable[..., Awaitable[str]]:
    """The tool as the runtime calls it: report the start, wait its I/O time, run it."""

    async def run(**args: Any) -> str:
        if on_tool is not None:
            on_tool(agent, tool.name)
        await trio.sleep(seconds)  # the tool's I/O: the slot serves other agents meanwhile
        return tool.fn(**args)

    run.__name__ = tool.name
    return run


def _words(text: str) -> set[str]:
    """The lowercase words and numbers of ``text``."""
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _require(value: str, what: str, example: str) -> str:
    """The stripped value, or a ToolResolutionError saying what to pass."""
    if not value.strip():
        raise ToolResolutionError(f"{what} is empty: pass one, for example {example!r}")
    return value.strip()


# --- researcher: a tiny library ------------------------------------------------------------------

_DOCS = {
    "doc-1": (
        "Hubble Space Telescope",
        "The Hubble Space Telescope was launched on 24 April 1990 aboard Space Shuttle Discovery.",
    ),
    "doc-2": (
        "James Webb Space Telescope",
        "The James Webb Space Telescope was launched on 25 December 2021 on an Ariane 5 rocket.",
    ),
    "doc-3": (
        "Spitzer Space Telescope",
        "The Spitzer Space Telescope was launched on 25 August 2003 and retired in 2020.",
    ),
}


def search_library(query: str) -> str:
    """The document whose title shares most words with ``query``, with its text."""
    words = _words(_require(query, "query", "Hubble launch"))
    ranked = sorted(_DOCS.items(), key=lambda item: (-len(words & _words(item[1][0])), item[0]))
    doc_id, (title, text) = ranked[0]
    return f"{doc_id} ({title}): {text} Next: call save_answer with the answer."


def save_answer(answer: str) -> str:
    """File the researcher's answer."""
    return f"answer saved: {_require(answer, 'answer', 'Hubble was launched on 24 April 1990.')}"


# --- analyst: a sales table ----------------------------------------------------------------------

_SALES = {
    "north": {"Q1": 120, "Q2": 150, "Q3": 135, "Q4": 170},
    "south": {"Q1": 90, "Q2": 95, "Q3": 110, "Q4": 105},
}


def get_sales(region: str) -> str:
    """Quarterly sales of one region, in thousands of dollars."""
    key = _require(region, "region", "north").lower().removesuffix(" region")
    if key not in _SALES:
        raise ToolResolutionError(
            f"there is no region {region!r}: the regions are {', '.join(sorted(_SALES))}"
        )
    quarters = _SALES[key]
    first_half = quarters["Q1"] + quarters["Q2"]
    listed = ", ".join(f"{q}={v}" for q, v in quarters.items())
    return (
        f"{key} region sales (thousand $): {listed}; Q1+Q2={first_half}. "
        "Next: call report_total with the total."
    )


def report_total(total: float) -> str:
    """File the analyst's total."""
    value = str(int(total)) if float(total).is_integer() else f"{total:g}"
    return f"total filed: {value} thousand $"


# --- writer: a product brief and a length-checked publish step --------------------------------

_BRIEFS = {
    "solar lamp": "Solar lamp: charges in 6 hours of sun, gives 12 hours of light, waterproof.",
}
_TAGLINE_LIMIT = 200


def get_brief(product: str) -> str:
    """The product brief the tagline is written from."""
    key = _require(product, "product", "solar lamp").lower()
    if key not in _BRIEFS:
        raise ToolResolutionError(
            f"there is no brief for {product!r}: the products are {', '.join(sorted(_BRIEFS))}"
        )
    return f"{_BRIEFS[key]} Next: call publish_tagline with a short tagline."


def publish_tagline(text: str) -> str:
    """Publish a tagline; a long one is sent back with the limit to meet."""
    tagline = _require(text, "text", "Sunlight by day, light all night.")
    if len(tagline) > _TAGLINE_LIMIT:
        raise ToolResolutionError(
            f"the tagline is {len(tagline)} characters; the limit is {_TAGLINE_LIMIT}: "
            "shorten it and publish it again"
        )
    return f"published: {tagline}"


# --- voice: the weather ---------------------------------------------------------------------------

_WEATHER = {"rome": "24 C and sunny", "oslo": "4 C with light rain", "paris": "11 C and cloudy"}


def get_weather(city: str) -> str:
    """Current weather of one city (a fixed table)."""
    key = _require(city, "city", "Rome").lower()
    if key not in _WEATHER:
        raise ToolResolutionError(
            f"no weather for {city!r}: the cities are {', '.join(sorted(_WEATHER))}"
        )
    return f"{city.strip()}: {_WEATHER[key]}"


# --- the agents ------------------------------------------------------------------------------------

_S = "string"
_N = "number"

_TAGLINE = "Sunlight by day, light all night."

AGENTS: tuple[AgentSpec, ...] = (
    AgentSpec(
        name="researcher",
        role="looks facts up in a document library",
        task="When was the Hubble Space Telescope launched?",
        prompt=(
            "You are a research assistant. Call search_library, then call save_answer with the "
            "answer in one sentence."
        ),
        tools=(
            _Tool(
                "search_library",
                "Search the document library; returns the best matching document.",
                {"query": (_S, "What to search for, e.g. 'Hubble launch'")},
                search_library,
            ),
            _Tool(
                "save_answer",
                "Save the final answer. Call it once, last.",
                {"answer": (_S, "The answer in one sentence")},
                save_answer,
            ),
        ),
        terminal="save_answer",
        plan=(
            PlannedCall("search_library", {"query": "Hubble Space Telescope launch"}),
            PlannedCall("save_answer", {"answer": "Hubble was launched on 24 April 1990."}),
        ),
    ),
    AgentSpec(
        name="analyst",
        role="works out figures from the sales table",
        task="What were the north region's total sales in Q1 and Q2 together?",
        prompt=(
            "You are a sales analyst. Call get_sales, then call report_total with the sum of "
            "the Q1 and Q2 figures."
        ),
        tools=(
            _Tool(
                "get_sales",
                "Quarterly sales of a region, in thousands of dollars.",
                {"region": (_S, "Region name: north or south")},
                get_sales,
            ),
            _Tool(
                "report_total",
                "Report the final total. Call it once, last.",
                {"total": (_N, "The total")},
                report_total,
            ),
        ),
        terminal="report_total",
        plan=(
            PlannedCall("get_sales", {"region": "north"}),
            PlannedCall("report_total", {"total": 270}),
        ),
    ),
    AgentSpec(
        name="writer",
        role="writes a product tagline from the brief",
        task="Write a one-line tagline for our solar lamp.",
        prompt=(
            "You are a copywriter. Call get_brief, then call publish_tagline with a short tagline."
        ),
        tools=(
            _Tool(
                "get_brief",
                "The product brief.",
                {"product": (_S, "Product name, e.g. 'solar lamp'")},
                get_brief,
            ),
            _Tool(
                "publish_tagline",
                "Publish the tagline. Call it once, last.",
                {"text": (_S, "The tagline, at most 200 characters")},
                publish_tagline,
            ),
        ),
        terminal="publish_tagline",
        plan=(
            PlannedCall("get_brief", {"product": "solar lamp"}),
            PlannedCall("publish_tagline", {"text": _TAGLINE}),
        ),
    ),
    AgentSpec(
        name="voice",
        role="answers a spoken question, fast",
        task="What's the weather in Rome right now?",
        prompt=(
            "You are a voice assistant. Call get_weather, then respond with one short sentence."
        ),
        tools=(
            _Tool(
                "get_weather",
                "Current weather in a city.",
                {"city": (_S, "City name, e.g. 'Rome'")},
                get_weather,
            ),
        ),
        plan=(
            PlannedCall("get_weather", {"city": "Rome"}),
            PlannedCall("respond", {"message": "It's 24 degrees and sunny in Rome."}),
        ),
        background=False,
    ),
)
"""researcher, analyst and writer (background specialists), then voice (the urgent request)."""

IDLE_VOICE = msgspec.structs.replace(
    AGENTS[-1],
    task="And what's the weather in Oslo?",
    plan=(
        PlannedCall("get_weather", {"city": "Oslo"}),
        PlannedCall("respond", {"message": "It's 4 degrees with light rain in Oslo."}),
    ),
)
"""The voice agent asked a second question once the slot is idle: the run's own baseline for
the voice TTFT under load (same prefix, same shape of turn, nothing else running)."""


def agent_by_task(agents: Sequence[AgentSpec] = AGENTS) -> dict[str, AgentSpec]:
    """Agents keyed by their task text (the simulated backend's conversation key)."""
    return {agent.task: agent for agent in agents}

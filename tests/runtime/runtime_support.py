"""Deterministic tools and a workflow shared by the runtime tests."""

import re
from typing import Any

import trio

from forge_rt.core import ToolDef, ToolSpec, Workflow
from forge_rt.errors import ToolResolutionError

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def admits(schema: dict[str, Any], tool: str, name: str, value: str) -> bool:
    """Whether one of a tool-call ``schema``'s single-call branches admits ``tool(name=value)``
    for a string argument ``name`` (its ``enum``, or its ``maxLength`` and any exclusion
    ``pattern``)."""
    for branch in schema["anyOf"]:
        if branch.get("type") != "object":
            continue  # the array-of-calls branch repeats the same calls
        props = branch["properties"]
        if props["name"]["const"] != tool:
            continue
        string = props["arguments"]["properties"][name]
        if "enum" in string:
            if value in string["enum"]:
                return True
            continue
        if len(value) <= string["maxLength"] and (
            "pattern" not in string or re.fullmatch(string["pattern"], value)
        ):
            return True
    return False


class Tools:
    """Deterministic tools that record what they were called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.tool_started = trio.Event()

    async def get_weather(self, city: str) -> str:
        # Async on purpose: a sync tool runs in a worker thread, and MockClock's autojump
        # advances time while a thread runs, which would make timed tests nondeterministic.
        self.calls.append(("get_weather", {"city": city}))
        if city == "Atlantis":
            raise ToolResolutionError("no such city: Atlantis; try a real city name")
        if city.startswith("Error"):
            raise RuntimeError("weather service down")
        return f"22C and sunny in {city}"

    async def slow_lookup(self, city: str) -> str:
        self.calls.append(("slow_lookup", {"city": city}))
        self.tool_started.set()
        await trio.sleep(100)
        return "never"

    def workflow(self, **overrides: Any) -> Workflow:
        fields: dict[str, Any] = {
            "name": "weather",
            "tools": [
                ToolDef(
                    spec=ToolSpec(name="get_weather", parameters=CITY), callable=self.get_weather
                ),
                ToolDef(
                    spec=ToolSpec(name="slow_lookup", parameters=CITY), callable=self.slow_lookup
                ),
            ],
            "required_steps": ["get_weather"],
            "system_prompt_template": "You answer weather questions.",
            "constrain": "never",
        }
        fields.update(overrides)
        return Workflow(**fields)

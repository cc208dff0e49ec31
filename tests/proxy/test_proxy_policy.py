"""The proxy's tool policy, with the official openai SDK as the client in front of the sim: a
denied tool never reaches the backend, and a call the model makes to it never reaches the
client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
import trio
from click.testing import CliRunner
from proxy_support import WEATHER_TOOL, in_thread, sim_proxy

from forge_rt.backends.sim import RequestView, SimConfig, SimToolCall
from forge_rt.errors import PolicyError
from forge_rt.proxy import ProxyConfig
from forge_rt.proxy._cli import proxy_command

DELETE_TOOL = {
    "type": "function",
    "function": {
        "name": "delete_file",
        "description": "Delete a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}
POLICY = {"tools": {"delete_file": {"verdict": "deny", "reason": "this proxy never deletes"}}}
USER = [{"role": "user", "content": "Weather in Paris, then tidy up."}]


class Recorder:
    """An oracle that replays ``intents`` in order and keeps every request the sim received."""

    def __init__(self, *intents: SimToolCall) -> None:
        self.intents = list(intents)
        self.views: list[RequestView] = []

    def __call__(self, view: RequestView) -> SimToolCall:
        self.views.append(view)
        return self.intents.pop(0)


def _sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=20)


async def _ask(url: str, **kw: Any) -> Any:
    with _sdk(url) as sdk:
        return await in_thread(
            lambda: sdk.chat.completions.create(
                model="local", messages=USER, tools=[WEATHER_TOOL, DELETE_TOOL], **kw
            )
        )


async def test_a_denied_tool_is_withheld_from_the_backend() -> None:
    """The backend is offered the allowed tool only, in its tools and its constraint."""
    oracle = Recorder(SimToolCall(name="get_weather", arguments={"city": "Paris"}))
    with trio.fail_after(20):
        # A JSON-schema constraint, which the sim's view shows (a grammar it only names).
        async with sim_proxy(SimConfig(oracle=oracle), policy=POLICY, prose_answers=False) as (
            _sim,
            url,
        ):
            reply = await _ask(url)
    [call] = reply.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    [view] = oracle.views
    assert {"get_weather", "respond"} == {t.name for t in view.tools}
    assert view.schema is not None
    assert "delete_file" not in json.dumps(view.schema)


async def test_a_call_of_a_denied_tool_is_refused_and_never_returned() -> None:
    """Decoding freely, the model calls the withheld tool: the proxy refuses it with the
    policy's reason and retries; the client only ever sees the allowed call."""
    oracle = Recorder(
        SimToolCall(name="delete_file", arguments={"path": "/"}),
        SimToolCall(name="get_weather", arguments={"city": "Paris"}),
    )
    with trio.fail_after(20):
        async with sim_proxy(SimConfig(oracle=oracle), policy=POLICY, constrain="never") as (
            _sim,
            url,
        ):
            reply = await _ask(url)
    [call] = reply.choices[0].message.tool_calls
    assert (
        call.function.name,
        json.loads(call.function.arguments),
    ) == ("get_weather", {"city": "Paris"})
    refusal = oracle.views[1].messages[-1]
    assert refusal.content.startswith(
        "[ToolError] Tool `delete_file` is not available: the policy denies it (this proxy "
        "never deletes)."
    )


async def test_tool_choice_naming_a_denied_tool_is_a_400() -> None:
    """A client that demands the denied tool gets a bad request naming the policy's reason."""
    oracle = Recorder()
    with trio.fail_after(20):
        async with sim_proxy(SimConfig(oracle=oracle), policy=POLICY) as (_sim, url):
            with pytest.raises(openai.BadRequestError, match="this proxy never deletes"):
                await _ask(
                    url, tool_choice={"type": "function", "function": {"name": "delete_file"}}
                )
    assert oracle.views == []


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        pytest.param(
            {"tools": {"delete_file": "approve"}},
            r"^proxy policy: tool 'delete_file' says approve, which the proxy cannot do: its "
            r"client runs the tools itself",
            id="approve",
        ),
        pytest.param(
            {"capabilities": {"network": "allow"}},
            r"^proxy policy: capability rules \['network'\] cannot apply",
            id="capability",
        ),
    ],
)
def test_what_the_proxy_cannot_apply_is_a_config_error(
    policy: dict[str, Any], message: str
) -> None:
    """Approve and capability rules fail when the config is built, saying why."""
    with pytest.raises(PolicyError, match=message):
        ProxyConfig(policy=policy)


def test_the_proxy_command_refuses_an_approve_policy_file(tmp_path: Path) -> None:
    """`forge-rt proxy --policy FILE` with an approve rule exits 2 before serving."""
    path = tmp_path / "policy.toml"
    path.write_text('[tools]\nturn_off_heating = "approve"\n', encoding="utf-8")
    # The command itself: the `forge-rt` group would configure global logging for later tests.
    result = CliRunner().invoke(proxy_command, ["--policy", str(path)], prog_name="forge-rt proxy")
    assert result.exit_code == 2
    assert "says approve, which the proxy cannot do" in result.output

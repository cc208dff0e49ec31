"""Tool capabilities and the policy gate: verdicts, which rule gave them, loading from TOML,
typed errors for bad rules, and a policy applied to a workflow."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from forge_rt.core import ALL_CAPABILITIES, Capability, ToolCall, ToolDef, ToolSpec, Workflow
from forge_rt.errors import PolicyError, ToolDeclinedError, WorkflowDefinitionError
from forge_rt.guardrails import (
    Allow,
    Approve,
    Deny,
    Execute,
    Guardrails,
    Policy,
    ToolErrors,
    ToolResult,
    apply_policy,
)


def _tool(name: str, needs: Any = None, **kw: Any) -> ToolDef:
    return ToolDef(spec=ToolSpec(name=name), callable=lambda: name, needs=needs, **kw)


SEARCH = _tool("search", needs=["network"])
HEAT = _tool("turn_off_heating", needs=["network", "writes_state"])
BUY = _tool("buy", needs={"network", "costs_money"})
PURE = _tool("add", needs=())
MYSTERY = _tool("mystery")


def test_needs_are_capabilities_and_undeclared_means_all() -> None:
    """Names become Capability values; no declaration is every capability, flagged."""
    assert frozenset({Capability.NETWORK}) == SEARCH.needs
    assert SEARCH.needs_declared
    assert frozenset() == PURE.effective_needs
    assert MYSTERY.needs is None
    assert not MYSTERY.needs_declared
    assert MYSTERY.effective_needs == ALL_CAPABILITIES


def test_an_unknown_capability_is_a_definition_error() -> None:
    """A misspelt need fails when the tool is defined, naming the capabilities there are."""
    with pytest.raises(WorkflowDefinitionError, match=r"^tool x: unknown capability 'net'; "):
        _tool("x", needs=["net"])


def test_a_name_rule_beats_capability_rules_and_says_so() -> None:
    """The rule for the tool's own name decides, and the decision names it."""
    policy = Policy(
        tools={"turn_off_heating": Approve("Turn off the heating?")},
        capabilities={"writes_state": Deny("read-only assistant")},
    )
    decision = policy.decide(HEAT)
    assert Approve("Turn off the heating?") == decision.verdict
    assert decision.rule == "tool 'turn_off_heating'"
    assert decision.reason == "Turn off the heating?"


def test_the_most_restrictive_matching_capability_wins() -> None:
    """Among the capabilities a tool needs, deny beats approve beats allow."""
    policy = Policy(capabilities={"network": "approve", "costs_money": Deny("no budget")})
    decision = policy.decide(BUY)
    assert Deny("no budget") == decision.verdict
    assert decision.rule == "capability 'costs_money'"
    assert policy.decide(SEARCH).rule == "capability 'network'"


def test_no_matching_rule_falls_to_the_default() -> None:
    """A tool no rule mentions gets the default, and the decision says it was the default."""
    policy = Policy(default=Deny("not vetted"), capabilities={"network": "allow"})
    assert Allow() == policy.decide(SEARCH).verdict
    decision = policy.decide(PURE)
    assert (Deny("not vetted"), "default") == (decision.verdict, decision.rule)


def test_an_undeclared_tool_meets_every_capability_rule() -> None:
    """Undeclared needs are the most demanding profile: a costs_money rule catches it."""
    policy = Policy(capabilities={"costs_money": Deny("no budget")})
    decision = policy.decide(MYSTERY)
    assert Deny("no budget") == decision.verdict
    assert not decision.declared


POLICY_TOML = """
default = "allow"

[tools]
turn_off_heating = { verdict = "approve", question = "Turn off the heating?" }
wipe = { verdict = "deny", reason = "never from a chat" }
search = "allow"

[capabilities]
costs_money = { verdict = "deny", reason = "no budget" }
network = "approve"
"""


def test_a_policy_loads_from_toml(tmp_path: Path) -> None:
    """The TOML form gives the same verdicts as the same rules written in code."""
    path = tmp_path / "policy.toml"
    path.write_text(POLICY_TOML, encoding="utf-8")
    policy = Policy.load(path)
    assert Allow() == policy.default
    assert {
        "turn_off_heating": Approve("Turn off the heating?"),
        "wipe": Deny("never from a chat"),
        "search": Allow(),
    } == policy.tools
    assert {
        Capability.COSTS_MONEY: Deny("no budget"),
        Capability.NETWORK: Approve(),
    } == policy.capabilities


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            '[capabilities]\nteleport = "deny"',
            r"^policy <policy>: policy rule capability 'teleport': unknown capability; the "
            r"capabilities are network, writes_state, spawns_processes, calls_llm, costs_money$",
            id="unknown-capability",
        ),
        pytest.param(
            '[tools]\nx = "maybe"',
            r"^policy <policy>: policy rule tool 'x': unknown verdict 'maybe'; use allow, deny "
            r"or approve$",
            id="unknown-verdict",
        ),
        pytest.param(
            '[tools]\nx = "deny"',
            r"^policy <policy>: policy rule tool 'x': a deny rule needs a reason",
            id="deny-without-reason",
        ),
        pytest.param(
            '[tools]\nx = { verdict = "allow", reason = "because" }',
            r"^policy <policy>: policy rule tool 'x': a allow rule takes no reason",
            id="reason-on-allow",
        ),
        pytest.param(
            "[tool]\nx = 'allow'",
            r"^policy <policy>: tool: Extra inputs are not permitted",
            id="misspelt-table",
        ),
        pytest.param("default = ", r"^policy <policy>: not valid TOML: ", id="bad-toml"),
    ],
)
def test_bad_rules_are_typed_errors(text: str, message: str) -> None:
    """Each malformed rule fails at load time with a PolicyError that says what to fix."""
    with pytest.raises(PolicyError, match=message):
        Policy.loads(text)


def test_policy_errors_pickle() -> None:
    """A PolicyError keeps its rule through pickling (ForgeError's contract)."""
    error = PolicyError("bad", rule="tool 'x'")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.rule) == ("bad", "tool 'x'")


def _workflow(**kw: Any) -> Workflow:
    fields: dict[str, Any] = {
        "name": "home",
        "tools": [SEARCH, HEAT, BUY, _tool("report", needs=())],
        "required_steps": ["search"],
    }
    fields.update(kw)
    return Workflow(**fields)


def test_applying_a_policy_removes_denied_tools_and_keeps_their_reasons() -> None:
    """Denied tools leave the workflow; their reasons and the approvals are recorded."""
    applied = apply_policy(
        _workflow(),
        Policy(
            tools={"turn_off_heating": Approve("Turn off the heating?")},
            capabilities={"costs_money": Deny("no budget")},
        ),
    )
    assert list(applied.workflow.tools) == ["search", "turn_off_heating", "report"]
    assert dict(applied.withheld) == {"buy": "no budget"}
    assert {"turn_off_heating": Approve("Turn off the heating?")} == dict(applied.approve)
    assert [d.tool for d in applied.decisions] == ["search", "turn_off_heating", "buy", "report"]


def test_a_terminal_among_several_can_be_denied() -> None:
    """One of several terminal tools denied: the others still end the workflow."""
    workflow = _workflow(terminal_tool=["buy", "report"], respond_tool=False)
    applied = apply_policy(workflow, Policy(capabilities={"costs_money": Deny("no budget")}))
    assert frozenset({"report"}) == applied.workflow.terminal_tools


@pytest.mark.parametrize(
    ("workflow", "policy", "message"),
    [
        pytest.param(
            _workflow(),
            Policy(tools={"search": Deny("offline")}),
            r"^workflow 'home': required step 'search' is denied by the policy \(tool "
            r"'search': offline\)",
            id="required-step",
        ),
        pytest.param(
            _workflow(terminal_tool="buy", respond_tool=False),
            Policy(tools={"buy": Deny("no budget")}),
            r"^workflow 'home': every terminal tool \['buy'\] is denied",
            id="only-terminal",
        ),
        pytest.param(
            _workflow(
                tools=[SEARCH, BUY, _tool("receipt", needs=(), prerequisites=["buy"])],
            ),
            Policy(tools={"buy": Deny("no budget")}),
            r"^workflow 'home': 'buy', a prerequisite of 'receipt', is denied",
            id="prerequisite",
        ),
        pytest.param(
            _workflow(),
            Policy(tools={"turn_of_heating": "approve"}),
            r"^policy: rule\(s\) for tool\(s\) \['turn_of_heating'\] that workflow 'home' "
            r"does not have",
            id="unknown-tool-name",
        ),
    ],
)
def test_a_policy_the_workflow_cannot_run_under_is_an_error(
    workflow: Workflow, policy: Policy, message: str
) -> None:
    """Denying what the workflow needs, or naming a tool it lacks, is a PolicyError."""
    with pytest.raises(PolicyError, match=message):
        apply_policy(workflow, policy)


def test_a_call_of_a_withheld_tool_is_refused_with_the_reason() -> None:
    """The guardrails refuse an invented call of a withheld tool, stating the policy's reason."""
    guard = Guardrails([SEARCH.spec], respond_tool=True, withheld={"buy": "no budget"})
    assert [t.name for t in guard.tools] == ["search", "respond"]
    action = guard.check([ToolCall(tool="buy", call_id="c1")])
    assert isinstance(action, ToolErrors)
    [error] = action.errors
    assert error.content.startswith(
        "[ToolError] Tool `buy` is not available: the policy denies it (no budget). It was "
        "not run. Available tools: `search`, `respond`."
    )


def test_a_declined_call_is_fed_back_and_not_counted() -> None:
    """A declined approval is the call's result, not a tool error and not a step."""
    guard = Guardrails([SEARCH.spec], required_steps=["search"], respond_tool=True)
    call = ToolCall(tool="search", call_id="c1")
    assert isinstance(guard.check([call]), Execute)
    error = ToolDeclinedError("declined", tool="search", call_id="c1", reason="the user said no")
    outcome = guard.record([ToolResult(call=call, error=error)])
    [message] = outcome.messages
    assert message.content.startswith("[Declined] The call of `search` was declined: the user")
    assert guard.errors.tool_errors == 0
    assert guard.tracker.completed_steps == ()


def test_a_withheld_tool_named_respond_gives_way_to_the_synthetic_one() -> None:
    """Withholding a caller's own `respond` leaves the synthetic respond tool offered."""
    guard = Guardrails([SEARCH.spec], respond_tool=True, withheld={"respond": "not yours"})
    assert [t.name for t in guard.tools] == ["search", "respond"]
    assert isinstance(guard.check([ToolCall(tool="respond", args={"message": "hi"})]), Execute)

"""The rule registry: one ordered list, documented in docs/guardrails.md, a switch per rule, and
every verdict naming the rule that decided it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from guard_support import ran, reply, spec

from forge_rt.core import ToolCall
from forge_rt.errors import ConfigurationError
from forge_rt.guardrails import (
    RULES,
    SCHEMA_RULE,
    Action,
    Execute,
    GuardrailOptions,
    Guardrails,
    ToolResult,
    rule_named,
)

DOCS = Path(__file__).parents[2] / "docs" / "guardrails.md"
BUDGETS = {"max_retries", "max_tool_errors", "max_premature", "max_prereq"}

PEEK = spec("peek_burrow", burrow_id="string")
TALLY = spec("tally_kits", burrow_id="string", count="integer")
LOG = spec("log_sighting", note="string")
REQUEST = "Check burrow BR-77 and log what you see."


def test_the_docs_list_the_registry_in_its_order() -> None:
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \| (\w+) \|", DOCS.read_text(), re.MULTILINE)
    assert [(int(n), name, stage) for n, name, stage in rows] == [
        (i, r.name, r.stage) for i, r in enumerate(RULES, start=1)
    ]


def test_every_options_field_is_a_rule_switch_or_a_budget() -> None:
    fields = set(GuardrailOptions.__struct_fields__)
    switches = {r.switch for r in RULES}
    assert len(switches) == len(RULES)  # no bundles: one switch per rule
    assert fields == switches | BUDGETS


def test_off_turns_every_rule_off() -> None:
    off = GuardrailOptions.off()
    assert [r.name for r in RULES if off.enabled(r.name)] == []
    assert {b: getattr(off, b) for b in BUDGETS} == {
        b: getattr(GuardrailOptions(), b) for b in BUDGETS
    }


@pytest.mark.parametrize("rule", [r.name for r in RULES])
def test_without_turns_off_the_named_rule_alone(rule: str) -> None:
    default = GuardrailOptions()
    without = default.without(rule)
    assert not without.enabled(rule)
    assert [r.name for r in RULES if r.name != rule and without.enabled(r.name)] == [
        r.name for r in RULES if r.name != rule and default.enabled(r.name)
    ]


def test_an_unknown_rule_names_the_real_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown guardrail rule 'chain_end'.*chain_ends"):
        GuardrailOptions().without("chain_end")
    with pytest.raises(ConfigurationError, match="unknown guardrail rule"):
        rule_named("")


def _burrows(options: GuardrailOptions, *, respond: bool = False) -> Guardrails:
    guard = Guardrails(
        [PEEK, TALLY, LOG],
        required_steps=["peek_burrow"],
        terminal_tools=[] if respond else ["log_sighting"],
        respond_tool=respond,
        options=options,
    )
    guard.new_turn(REQUEST)
    return guard


def _peeked(options: GuardrailOptions, *, respond: bool = False) -> Guardrails:
    guard = _burrows(options, respond=respond)
    ran(guard, "peek_burrow", "BR-77: two kits asleep near the east exit", burrow_id="BR-77")
    return guard


def _looped(options: GuardrailOptions) -> Action:
    guard = _peeked(options)
    for _ in range(2):
        action = guard.check(reply("tally_kits", burrow_id="BR-77", count=2))
        assert isinstance(action, Execute), action
        guard.record([ToolResult(call=action.calls[0], output="2 kits")])
    return guard.check(reply("tally_kits", burrow_id="BR-77", count=2))


def _unfounded(options: GuardrailOptions) -> Action:
    guard = _burrows(msgspec.structs.replace(options, steps=False))
    return guard.check(reply("tally_kits", burrow_id="QX-3", count=41), text_offered=True)


# (rule, options where it is on, the reply it decides)
CASES: list[tuple[str, GuardrailOptions, Callable[[GuardrailOptions], Action]]] = [
    ("retry_nudges", GuardrailOptions(), lambda o: _burrows(o).check("The kits seem fine.")),
    (
        "prose_answers",
        GuardrailOptions(prose_answers=True),
        lambda o: _burrows(o).check("The kits seem fine.", text_offered=True),
    ),
    (
        "placeholders",
        GuardrailOptions(),
        lambda o: _burrows(o).check(reply("peek_burrow", burrow_id="<burrow_id>")),
    ),
    ("steps", GuardrailOptions(), lambda o: _burrows(o).check(reply("log_sighting", note="ok"))),
    (
        "guessed_values",
        GuardrailOptions(),
        lambda o: _burrows(o).check(reply("peek_burrow", burrow_id="BR-12")),
    ),
    ("unfounded_calls", GuardrailOptions(unfounded_calls=True), _unfounded),
    ("loop_guard", GuardrailOptions(), _looped),
    (
        "answer_grounding",
        GuardrailOptions(),
        lambda o: _peeked(o, respond=True).check(reply("respond", message="All quiet.")),
    ),
]


@pytest.mark.parametrize(("rule", "options", "decide"), CASES, ids=[c[0] for c in CASES])
def test_a_verdict_names_its_rule_and_the_switch_lets_the_reply_past_it(
    rule: str, options: GuardrailOptions, decide: Callable[[GuardrailOptions], Action]
) -> None:
    decided = decide(options)
    assert getattr(decided, "rule", None) == rule
    past = decide(options.without(rule))
    assert getattr(past, "rule", "") != rule


def test_a_call_the_schema_rejects_is_refused_with_every_rule_off() -> None:
    guard = _burrows(GuardrailOptions.off())
    action = guard.check(reply("tally_kits", burrow_id="BR-77", count="many"))
    assert getattr(action, "rule", None) == SCHEMA_RULE
    unknown = guard.check([ToolCall(tool="dig_tunnel", args={}, call_id="d1")])
    assert getattr(unknown, "rule", None) == SCHEMA_RULE


@pytest.mark.parametrize("rule", [r.name for r in RULES if not GuardrailOptions().enabled(r.name)])
def test_enabling_turns_on_a_rule_that_is_off_by_default(rule: str) -> None:
    options = GuardrailOptions().enabling(rule)
    assert options.enabled(rule)
    assert options.without(rule) == GuardrailOptions()


def test_enabling_the_loop_guard_gives_its_default_repeats() -> None:
    off = GuardrailOptions(loop_repeats=None)
    assert off.enabling("loop_guard").loop_repeats == GuardrailOptions().loop_repeats

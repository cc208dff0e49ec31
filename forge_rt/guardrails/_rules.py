"""The guardrail rules, by name and in the order a reply meets them: one registry.

Every behaviour of :class:`~forge_rt.guardrails.Guardrails` that can send a reply back, shape the
next request or change what a tool result says is a rule here, switched by the
:class:`~forge_rt.guardrails.GuardrailOptions` field of the same name (``loop_guard`` by
``loop_repeats``, whose ``None`` is off). The order of :data:`RULES` is the order of judging: the
first rule of the ``read``, ``calls`` and ``answer`` stages that objects to a reply decides what
happens to it, and its name is recorded with the verdict (``Action.rule``, the trace's
``Decision.rule``, ``RunStats.rules``, the eval's records). The ``next`` rules shape the request
after a rejection; the ``results`` rules act on what the tools returned.

``docs/guardrails.md`` lists the same rules in the same order (a test holds them together), and
the eval pairs each rule against the pipeline without it (``-a without:NAME``).

Two things are not rules, because no switch could make them optional: a call runs only with the
arguments its tool's schema accepts (``schema``: the tool's own contract), and identical calls of
one reply run once (collapsed).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from forge_rt.errors import ConfigurationError

__all__ = ["RULES", "SCHEMA_RULE", "Rule", "RuleStage", "rule_named"]

RuleStage = Literal["read", "calls", "answer", "next", "results"]
"""Where a rule acts: ``read`` -- turning the reply into calls (or an answer); ``calls`` -- the
calls of a reply that parsed; ``answer`` -- a reply that is only a terminal call; ``next`` -- the
request after a rejection (what the constraint offers); ``results`` -- the tool results the model
reads next."""

SCHEMA_RULE = "schema"
"""The name a verdict carries when a call's arguments broke its tool's schema or named an
unknown tool: the tool's contract, not a switchable rule."""


class Rule(msgspec.Struct, frozen=True, kw_only=True):
    """One guardrail rule: its ``name`` (the verdict's ``rule``), the ``stage`` it acts in, what
    it ``reads`` and what it ``does``, and the :class:`GuardrailOptions` field that switches it
    (``option``; its ``off`` value turns the rule off)."""

    name: str
    stage: RuleStage
    reads: str
    does: str
    option: str = ""
    off: bool | None = False

    @property
    def switch(self) -> str:
        """The options field that switches this rule."""
        return self.option or self.name


RULES: tuple[Rule, ...] = (
    Rule(
        name="rescue",
        stage="read",
        reads="the reply's text",
        does="reads calls written as text (bare or fenced JSON, XML tags, Python-call syntax)",
    ),
    Rule(
        name="placeholders",
        stage="read",
        reads="each argument value, the corrections shown so far, the facts given",
        does=(
            "refuses a value that is a placeholder, chat markup, a parameter's own name or "
            "description, or a copy of a correction, and shows a same-shaped value the task gave"
        ),
    ),
    Rule(
        name="markup_answers",
        stage="read",
        reads="a refused answer of the synthetic respond tool, the turn's results",
        does=(
            "answers an answer made of tool-result markup with the results to relay, and keeps "
            "the next constrained answers from starting with markup"
        ),
    ),
    Rule(
        name="prose_answers",
        stage="read",
        reads="a reply with no call, where the constraint offered text",
        does="takes the text as the answer unless it copies a correction",
    ),
    Rule(
        name="cut_answers",
        stage="read",
        reads=(
            "a reply stopped at the token limit or for repeating itself, where text was "
            "offered, that holds no call"
        ),
        does=(
            "takes the answer it was writing -- its prose, or the respond tool's message -- up "
            "to the cut (a loop written once) as the answer, as a chat API returns one that "
            "ran long, instead of asking again"
        ),
    ),
    Rule(
        name="retry_nudges",
        stage="read",
        reads="a reply with no usable call",
        does="sends it back with a nudge that names the cause and the tools (off: it is the answer)",
    ),
    Rule(
        name="steps",
        stage="calls",
        reads="the workflow's required steps, terminal tools and prerequisites, the steps done",
        does=(
            "refuses a terminal call before the required steps and a call before its "
            "prerequisite; the rest of the reply runs"
        ),
    ),
    Rule(
        name="answered_calls",
        stage="calls",
        reads=(
            "the calls a caller's history already answered, and this turn's calls of tools "
            "that are not idempotent that succeeded"
        ),
        does=(
            "drops such a call beside fresh ones; alone, answers it from the history and asks "
            "again; insisted on, warns, then ends the turn"
        ),
    ),
    Rule(
        name="unrelated_tools",
        stage="calls",
        reads=(
            "the words of the tools a turn's first reply calls (name, description, parameters), "
            "against the request's"
        ),
        does=(
            "sends back, once a turn, a reply where text was open whose every call is to a tool "
            "that shares no word with the request"
        ),
    ),
    Rule(
        name="unfounded_calls",
        stage="calls",
        reads="every value of the reply's calls, against all the model was given",
        does=(
            "sends back, once a turn, a reply where text was open whose every call holds only "
            "values found nowhere"
        ),
    ),
    Rule(
        name="guessed_values",
        stage="calls",
        reads="ids, paths and fractional numbers in the calls, the facts given, pending steps",
        does=(
            "sends back, once a value, a call with a value from nowhere where a same-shaped "
            "given value or a pending step says where the real one comes from"
        ),
    ),
    Rule(
        name="listing_pick",
        stage="calls",
        reads="the turn's listings and the request's words",
        does=(
            "sends back, once a turn, a call that picked an item of a listing the request does "
            "not name while it names another"
        ),
    ),
    Rule(
        name="named_row",
        stage="calls",
        reads="ids the calls hold, the facts given, the turn's listings and the request's words",
        does=(
            "sends back, once a value, a call with an id no fact holds, with the id of the "
            "listing's row the request names best"
        ),
    ),
    Rule(
        name="loop_guard",
        stage="calls",
        reads="the calls of the turn, in a row",
        does=(
            "warns on the same call repeated, then blocks it; past the limit the run ends "
            "(ToolLoopError)"
        ),
        option="loop_repeats",
        off=None,
    ),
    Rule(
        name="list_coverage",
        stage="answer",
        reads="items listed in the request or a result, the calls made for their siblings",
        does="sends back, once a turn, a terminal call while a listed item was never looked up",
    ),
    Rule(
        name="lost_numbers",
        stage="answer",
        reads="the numbers the request gives, the calls that take one",
        does="sends back, once a turn, a terminal call while a given number reached no tool",
    ),
    Rule(
        name="answer_grounding",
        stage="answer",
        reads="the answer of the synthetic respond tool, the turn's results",
        does="sends back, once a turn, an answer that shares no word or number with the results",
    ),
    Rule(
        name="chain_ends",
        stage="answer",
        reads="a terminal call's text, the lookup chains of the turn",
        does="sends back, once a turn, a terminal call that leaves out what a chain ended with",
    ),
    Rule(
        name="every_end",
        stage="answer",
        reads="a terminal call's text, every result of the turn that no later call followed",
        does=(
            "sends back, once a turn, a terminal call that names nothing only one such result "
            "had (a fan-out's lookups included); the next answer is held to all of them"
        ),
    ),
    Rule(
        name="answer_from_results",
        stage="next",
        reads="an answer sent back by answer_grounding, chain_ends, every_end or placeholders",
        does="constrains the next answer to the results it should relay, verbatim",
    ),
    Rule(
        name="call_list",
        stage="next",
        reads="the request's tools",
        does=(
            "writes a constrained reply as a JSON list of calls, so the model chooses after "
            "each call between another and the end"
        ),
    ),
    Rule(
        name="fan_out",
        stage="next",
        reads="the request's tools, and which of them write",
        does=(
            "writes a constrained reply as a JSON list of one tool's calls: a fan-out over "
            "items in one reply, calls of different tools one reply each; a tool that writes "
            "is called once a reply (call_list, when on, takes precedence)"
        ),
    ),
    Rule(
        name="failure_streak",
        stage="next",
        reads="the tools that failed in replies in a row",
        does="leaves a tool that failed twice in a row out of the constraint until a call succeeds",
    ),
    Rule(
        name="stale_calls",
        stage="next",
        reads="batches that only repeated calls that had succeeded",
        does="offers only the terminal tools after two such batches, with no step pending",
    ),
    Rule(
        name="recovery",
        stage="results",
        reads="a failed tool call",
        does=(
            "feeds the failure back within the tool-error budget (off: the first failure ends "
            "the run)"
        ),
    ),
    Rule(
        name="error_values",
        stage="results",
        reads="a tool's 'called wrong' error, the values it quotes or lists, the request",
        does=(
            "adds the corrected call with the listed value that is the refused one spelled "
            "another way, else the one the request names, else the one clearly most like it"
        ),
    ),
    Rule(
        name="result_notes",
        stage="results",
        reads="the call history of the turn",
        does=(
            "adds a note to a result that repeats an earlier call, follows the same tool again, "
            "or was shown to the user mid-task: what comes next"
        ),
    ),
)


def rule_named(name: str) -> Rule:
    """The rule called ``name``; a typo lists the real ones."""
    for rule in RULES:
        if rule.name == name:
            return rule
    raise ConfigurationError(
        f"unknown guardrail rule {name!r}; choose from {[r.name for r in RULES]}"
    )

"""Which guardrails are on, and how much each may absorb: one typed struct for every front door.

The runtime (``Session``, ``WorkflowRunner``), the eval's ablations and the middleware facade all
take a :class:`GuardrailOptions`, so an option is spelled, defaulted and checked in one place.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from forge_rt.errors import ConfigurationError
from forge_rt.guardrails._rules import RULES, rule_named
from forge_rt.guardrails._shape import CallShape

__all__ = ["GuardrailOptions"]

_DEFAULT_LOOP_REPEATS = 3


class GuardrailOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Which guardrail rules are on, and the budgets of the run.

    Every rule of :data:`~forge_rt.guardrails.RULES` is switched by the field of its own name
    (the loop guard by ``loop_repeats``: how often the same call may repeat before the guard
    steps in, ``None`` for no guard); what each rule reads and does is in the registry and in
    docs/guardrails.md. :meth:`off` turns every rule off, :meth:`without` the rules named.

    Off by default, as measured: the three rules of a reply's shape, which the proxy turns on
    where they were judged on held-out data (``call_list``, ``prose_answers``,
    ``unfounded_calls``; docs/eval/rules.md).

    Budgets, each counting rejected replies in a row before the run ends with its typed error:
    ``max_retries`` (no usable call), ``max_tool_errors`` (failing tools), ``max_premature``
    (terminal tool too early), ``max_prereq`` (prerequisite missing).
    """

    # read
    rescue: bool = True
    placeholders: bool = True
    markup_answers: bool = True
    prose_answers: bool = False
    cut_answers: bool = True
    retry_nudges: bool = True
    # calls
    steps: bool = True
    answered_calls: bool = True
    unrelated_tools: bool = True
    unfounded_calls: bool = False
    guessed_values: bool = True
    listing_pick: bool = True
    named_row: bool = True
    loop_repeats: int | None = _DEFAULT_LOOP_REPEATS
    # answer
    list_coverage: bool = True
    lost_numbers: bool = True
    answer_grounding: bool = True
    chain_ends: bool = True
    every_end: bool = True
    # next request
    answer_from_results: bool = True
    call_list: bool = False
    fan_out: bool = False
    failure_streak: bool = True
    stale_calls: bool = True
    # results
    recovery: bool = True
    error_values: bool = True
    result_notes: bool = True
    # budgets
    max_retries: int = 3
    max_tool_errors: int = 2
    max_premature: int = 3
    max_prereq: int = 3

    def __post_init__(self) -> None:
        for name in ("max_retries", "max_tool_errors", "max_premature", "max_prereq"):
            value = getattr(self, name)
            if value < 0:
                raise ConfigurationError(f"GuardrailOptions.{name} must be >= 0, got {value}")
        if self.loop_repeats is not None and self.loop_repeats < 2:
            raise ConfigurationError(
                f"GuardrailOptions.loop_repeats must be >= 2 or None (no loop guard), got "
                f"{self.loop_repeats}"
            )

    def call_shape(self, *, parallel: bool = True, writes: Iterable[str] = ()) -> CallShape:
        """The shape of a constrained reply under these options: several calls where
        ``parallel``, always as a list with ``call_list`` (or ``fan_out``: a list of one tool's
        calls, where ``call_list`` is off; of one call for the tools in ``writes``, those that
        are not idempotent), text as a branch with ``prose_answers``. Every constraint of a run
        is built in this shape."""
        one_tool = self.fan_out and not self.call_list
        return CallShape(
            parallel=parallel,
            listed=self.call_list or self.fan_out,
            one_tool=one_tool,
            single=frozenset(writes) if one_tool else frozenset(),
            prose=self.prose_answers,
        )

    def enabled(self, rule: str) -> bool:
        """Whether the rule called ``rule`` is on."""
        found = rule_named(rule)
        return bool(getattr(self, found.switch) != found.off)

    def without(self, *rules: str) -> GuardrailOptions:
        """These options with the rules named turned off (an unknown name is a
        :class:`~forge_rt.errors.ConfigurationError` that lists the real ones)."""
        changes = {(found := rule_named(name)).switch: found.off for name in rules}
        return msgspec.structs.replace(self, **changes)

    def enabling(self, *rules: str) -> GuardrailOptions:
        """These options with the rules named turned on (the loop guard at its default
        ``loop_repeats``); an unknown name is a :class:`~forge_rt.errors.ConfigurationError`."""
        on: dict[str, object] = {}
        for name in rules:
            found = rule_named(name)
            if not self.enabled(name):
                on[found.switch] = True if found.off is False else _DEFAULT_LOOP_REPEATS
        return msgspec.structs.replace(self, **on)

    @classmethod
    def off(cls) -> GuardrailOptions:
        """Every rule off: the model's raw behaviour (the eval's ``bare`` arm). Only the
        tools' schemas still hold: a call runs only with arguments its tool accepts."""
        return cls().without(*(rule.name for rule in RULES))

"""Ablation presets: which guardrails a run keeps, to measure what each one contributes."""

from __future__ import annotations

import msgspec

from forge_rt.core import ConstrainMode
from forge_rt.errors import ConfigurationError
from forge_rt.guardrails import GuardrailOptions, rule_named

__all__ = ["ABLATIONS", "WITHOUT", "Ablation", "ablation"]


class Ablation(msgspec.Struct, frozen=True, kw_only=True):
    """A named set of switches: Guardrails options, compaction on/off, constrained decoding."""

    name: str
    description: str
    guardrails: GuardrailOptions = msgspec.field(default_factory=GuardrailOptions)
    compact: bool = True
    constrain: ConstrainMode = "never"  # the single-guardrail ablations decode freely


ABLATIONS: dict[str, Ablation] = {
    a.name: a
    for a in (
        Ablation(
            name="full",
            description="the default: every guardrail on, output constrained where the backend can",
            constrain="auto",
        ),
        Ablation(
            name="unconstrained",
            description="every guardrail on, free decoding (rescue parsing reads the reply)",
        ),
        Ablation(
            name="no_rescue",
            description="native tool calls only",
            guardrails=GuardrailOptions(rescue=False),
        ),
        Ablation(
            name="no_nudge",
            description="bare text ends the run instead of a retry nudge",
            guardrails=GuardrailOptions(retry_nudges=False),
        ),
        Ablation(
            name="no_steps",
            description="required steps and prerequisites not enforced",
            guardrails=GuardrailOptions(steps=False),
        ),
        Ablation(
            name="no_recovery",
            description="the first tool failure ends the run",
            guardrails=GuardrailOptions(recovery=False),
        ),
        Ablation(name="no_compact", description="no context compaction", compact=False),
        Ablation(
            name="constrained",
            description="every guardrail on, output constrained to a valid tool call",
            constrain="always",
        ),
        Ablation(
            name="bare",
            description="everything off: the model's raw behaviour",
            guardrails=GuardrailOptions.off(),
            compact=False,
        ),
    )
}


WITHOUT = "without:"
"""The prefix of the ablations made from the rule registry: ``without:NAME`` is the default
(``full``) with the guardrail rule ``NAME`` off, to pair each rule against the pipeline without
it (see :data:`~forge_rt.guardrails.RULES`)."""


def ablation(name: str) -> Ablation:
    """The preset called ``name``, or ``without:RULE``; a typo lists the real ones."""
    if name.startswith(WITHOUT):
        try:
            rule = rule_named(name.removeprefix(WITHOUT))
        except ConfigurationError as exc:
            raise ValueError(f"ablation {name!r}: {exc}") from None
        return Ablation(
            name=name,
            description=f"the default without the rule {rule.name}: {rule.does}",
            guardrails=GuardrailOptions().without(rule.name),
            constrain="auto",
        )
    try:
        return ABLATIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown ablation {name!r}; choose from {sorted(ABLATIONS)} or {WITHOUT}RULE"
        ) from None

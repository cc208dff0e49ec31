"""Ablation presets: which guardrails a run keeps, to measure what each one contributes."""

from __future__ import annotations

import msgspec

from forge_rt.core import ConstrainMode
from forge_rt.errors import ConfigurationError
from forge_rt.guardrails import GuardrailOptions, rule_named

__all__ = ["ABLATIONS", "WITH", "WITHOUT", "Ablation", "ablation"]


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


WITH = "with:"
"""The prefix of ``with:NAME``: the default with the rule ``NAME`` on, for a rule that is off by
default and not yet judged (pair it with ``full`` on dev). Either prefix takes several rules
joined by ``+`` (``with:call_list+unfounded_calls``)."""


def ablation(name: str) -> Ablation:
    """The preset called ``name``, or ``without:RULE`` / ``with:RULE``; a typo lists the real
    ones."""
    for prefix in (WITHOUT, WITH):
        if not name.startswith(prefix):
            continue
        try:
            rules = [rule_named(part) for part in name.removeprefix(prefix).split("+")]
        except ConfigurationError as exc:
            raise ValueError(f"ablation {name!r}: {exc}") from None
        names = [rule.name for rule in rules]
        options = GuardrailOptions()
        switched = options.without(*names) if prefix == WITHOUT else options.enabling(*names)
        what = "; ".join(f"{rule.name}: {rule.does}" for rule in rules)
        return Ablation(
            name=name,
            description=f"the default {prefix.rstrip(':')} the rules {what}",
            guardrails=switched,
            constrain="auto",
        )
    try:
        return ABLATIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown ablation {name!r}; choose from {sorted(ABLATIONS)}, {WITHOUT}RULE or "
            f"{WITH}RULE"
        ) from None

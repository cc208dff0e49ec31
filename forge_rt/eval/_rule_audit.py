"""The per-rule audit: for each guardrail rule, how often it fired, how runs went after it, and
what it changed against the pipeline without it.

A rule is kept only if it pays on held-out data (docs/eval/heldout.md): tried on the dev split,
audited on the test split at release, where a rule whose paired effect is below zero goes. This
module reads one results file and gives each rule of :data:`~forge_rt.guardrails.RULES` a line:

- **fired**: the baseline arm's runs in which the rule decided at least one reply (the records'
  ``rules``; for ``rescue``, a call read from text: ``rescued``), and how many of those ended
  correct; for a ``results`` rule, the runs in which it added to or fed back a result. The
  ``next`` rules shape the requests rather than decide a reply: their firings are not counted
  (``counted`` is ``False``), only their pairing;
- **paired**, where the file holds the arm ``without:RULE``: the runs the rule turned right
  (correct with it, wrong without), the runs it turned wrong, and McNemar's exact p -- paired by
  (case, run), as every comparison of the eval.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from forge_rt.errors import ConfigurationError
from forge_rt.eval._ablation import WITHOUT
from forge_rt.eval._metrics import mcnemar_p
from forge_rt.eval._record import RunRecord
from forge_rt.guardrails import RULES, rule_named

__all__ = ["RuleLine", "fired_in", "rule_audit"]


class RuleLine(msgspec.Struct, frozen=True, kw_only=True):
    """One rule's line of the audit (see the module docstring). ``paired`` is ``False`` where
    the file has no ``without:`` arm for the rule; ``gained``/``lost`` count the runs the rule
    turned right/wrong."""

    rule: str
    stage: str
    runs: int
    counted: bool
    fired: int
    correct_when_fired: int
    paired: bool = False
    pairs: int = 0
    gained: int = 0
    lost: int = 0
    p: float | None = None


_DECIDING = frozenset({"read", "calls", "answer", "results"})


def _fired(record: RunRecord, rule: str) -> bool:
    """Whether ``rule`` acted in the run of ``record``."""
    if rule == "rescue":
        return bool(record.rescued)
    return record.rules.get(rule, 0) > 0


def rule_audit(records: Iterable[RunRecord], *, baseline: str = "full") -> list[RuleLine]:
    """The audit of every rule over ``records``, against the arm ``baseline``, in the order
    of the registry. Raises ``ValueError`` when no record is of the baseline arm."""
    everything = list(records)
    base = [r for r in everything if r.ablation == baseline]
    if not base:
        arms = sorted({r.ablation for r in everything})
        raise ValueError(f"no run of the baseline arm {baseline!r}; the file has {arms}")
    by_key = {(r.suite, r.scenario, r.run): r.correct for r in base}
    lines = []
    for rule in RULES:
        counted = rule.stage in _DECIDING
        fired = [r for r in base if counted and _fired(r, rule.name)]
        line = RuleLine(
            rule=rule.name,
            stage=rule.stage,
            runs=len(base),
            counted=counted,
            fired=len(fired),
            correct_when_fired=sum(r.correct for r in fired),
        )
        without = {
            (r.suite, r.scenario, r.run): r.correct
            for r in everything
            if r.ablation == f"{WITHOUT}{rule.name}"
        }
        if without:
            keys = by_key.keys() & without.keys()
            gained = sum(1 for k in keys if by_key[k] and not without[k])
            lost = sum(1 for k in keys if without[k] and not by_key[k])
            line = msgspec.structs.replace(
                line,
                paired=True,
                pairs=len(keys),
                gained=gained,
                lost=lost,
                p=mcnemar_p(gained, lost),
            )
        lines.append(line)
    return lines


def fired_in(records: Iterable[RunRecord], rule: str, *, baseline: str = "full") -> list[str]:
    """The cases of the arm ``baseline`` in which ``rule`` fired, once each, in file order:
    what a pairing of a rule that judges replies needs to run (``-s``). Raises ``ValueError``
    for a rule that is not in the registry or not counted (it shapes requests: pair it on
    every case)."""
    try:
        stage = rule_named(rule).stage
    except ConfigurationError:
        names = ", ".join(r.name for r in RULES)
        raise ValueError(f"no rule named {rule!r}; the rules are {names}") from None
    if stage not in _DECIDING:
        raise ValueError(
            f"{rule} acts in the {stage} stage, where a firing is not recorded per run: pair "
            "it on every case"
        )
    cases = [r.scenario for r in records if r.ablation == baseline and _fired(r, rule)]
    return list(dict.fromkeys(cases))

"""Continuing a constrained reply that was cut off: the constraint for the rest of it.

A backend applies a grammar or JSON schema to the text it generates *now*. A call preempted
half-way and continued from its partial text (assistant prefill) must therefore be held to what
may follow that text, not to a whole reply again. :func:`continuation_constraint` gives that
constraint as a grammar (:meth:`~forge_rt.guardrails.Gbnf.remainder`), or says why there is none,
so the caller restarts the call instead.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec

from forge_rt.core import GrammarConstraint, JsonSchemaConstraint, OutputConstraint
from forge_rt.errors import GrammarError, ToolSchemaError
from forge_rt.guardrails._constrain import schema_grammar
from forge_rt.guardrails._gbnf import Gbnf

__all__ = ["Continuation", "continuation_constraint"]


class Continuation(msgspec.Struct, frozen=True, kw_only=True):
    """The constraint for the rest of a reply, or (``constraint`` None) why it cannot continue."""

    constraint: GrammarConstraint | None
    reason: str = ""


@lru_cache(maxsize=64)
def _grammar(text: str) -> Gbnf:
    return Gbnf(text)


def continuation_constraint(constraint: OutputConstraint, prefix: str) -> Continuation:
    """The constraint under which a reply begun as ``prefix`` under ``constraint`` may go on.
    A JSON schema is first written as the equivalent grammar (:func:`schema_grammar`); a prefix
    that is not a beginning of this grammar (a backend's own conversion may differ in whitespace
    or key order) has no continuation, and the reason says so."""
    try:
        if isinstance(constraint, GrammarConstraint):
            grammar = _grammar(constraint.gbnf)
        else:
            assert isinstance(constraint, JsonSchemaConstraint)
            if _has_ref(constraint.schema):
                # The grammar writer reads inlined schemas; a reference would become "any value".
                return Continuation(
                    constraint=None, reason="the JSON schema has $ref references to follow"
                )
            grammar = _grammar(schema_grammar(constraint.schema))
    except (GrammarError, ToolSchemaError) as exc:
        return Continuation(constraint=None, reason=f"the constraint cannot be continued: {exc}")
    rest = grammar.remainder(prefix)
    if rest is None:
        return Continuation(
            constraint=None,
            reason="the partial reply is not a beginning the grammar can continue",
        )
    return Continuation(constraint=GrammarConstraint(gbnf=rest))


def _has_ref(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "$ref" in schema or any(_has_ref(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_ref(v) for v in schema)
    return False

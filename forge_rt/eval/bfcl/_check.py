"""BFCL's verdict on what a case's run produced: its own checkers, called as its runner does.

The decoding is the harness's part (BFCL leaves it to each model's handler): the calls a client
received, under their BFCL names, as ``[{name: arguments}]`` for the AST checker and as Python
call strings (``name(key=value)``) for the executable multi-turn checker. Everything after that
is BFCL's: the AST checker for ``ast`` categories; "no call" for irrelevance and "a call" for
relevance, as BFCL's relevance runner decides them; the state-and-response checker for
multi-turn.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import msgspec

from forge_rt.eval.bfcl._cases import BfclCase
from forge_rt.eval.bfcl._package import checkers

__all__ = [
    "Call",
    "CheckVerdict",
    "as_python_call",
    "check_multi_turn",
    "check_single_turn",
    "execute_on_instances",
    "executed_instances",
]


class Call(msgspec.Struct, frozen=True):
    """One call the client received, under its BFCL name."""

    name: str
    arguments: dict[str, Any]


class CheckVerdict(msgspec.Struct, frozen=True, kw_only=True):
    """BFCL's verdict: ``valid``, and when not, its error type and messages."""

    valid: bool
    error_type: str = ""
    errors: tuple[str, ...] = ()

    @classmethod
    def of(cls, result: dict[str, Any]) -> CheckVerdict:
        errors = result.get("error", ())
        if isinstance(errors, dict):  # the multi-turn checker nests its messages
            messages = errors.get("error_message", ())
            errors = messages if isinstance(messages, list) else [messages]
        return cls(
            valid=bool(result["valid"]),
            error_type=str(result.get("error_type", "")),
            errors=tuple(str(e)[:300] for e in errors) if not result["valid"] else (),
        )


def check_single_turn(case: BfclCase, calls: Sequence[Call], *, model_name: str) -> CheckVerdict:
    """BFCL's verdict on the calls one single-turn case's reply held."""
    if case.check == "irrelevance":
        if calls:
            return CheckVerdict(
                valid=False,
                error_type="irrelevance_error:decoder_success",
                errors=("Valid syntax. Successfully decode AST when it should not.",),
            )
        return CheckVerdict(valid=True)
    if case.check == "relevance":
        if not calls:
            return CheckVerdict(
                valid=False,
                error_type="relevance_error:decoder_failed",
                errors=("Invalid syntax. Failed to decode AST when it should have.",),
            )
        return CheckVerdict(valid=True)
    if case.check != "ast":
        raise ValueError(f"{case.id}: a {case.check} case is checked by check_multi_turn")
    if not calls:
        # A reply without calls is text, which a function-calling handler cannot decode.
        return CheckVerdict(
            valid=False,
            error_type="ast_decoder:decoder_failed",
            errors=("Invalid syntax. Failed to decode AST: the reply held no function call.",),
        )
    bfcl = checkers()
    result = bfcl.ast_checker(
        list(case.functions),
        [{c.name: dict(c.arguments)} for c in calls],
        case.ground_truth,
        bfcl.python,
        case.category,
        model_name,
    )
    return CheckVerdict.of(result)


def as_python_call(call: Call) -> str:
    """The call as BFCL's executable format writes it: ``name(key=repr(value), ...)``."""
    arguments = ",".join(f"{key}={value!r}" for key, value in call.arguments.items())
    return f"{call.name}({arguments})"


def execute_on_instances(case: BfclCase, calls: Sequence[Call], *, prefix: str) -> list[str]:
    """Run ``calls`` on the case's BFCL API instances named by ``prefix`` (BFCL's ``execute``);
    each call's result as BFCL renders it (an error is its text, as the model should see it)."""
    results, _ = checkers().execute_multi_turn_func_call(
        func_call_list=[as_python_call(c) for c in calls],
        initial_config=case.initial_config,
        involved_classes=list(case.involved_classes),
        model_name=prefix,
        test_entry_id=case.id,
    )
    return [str(r) for r in results]


@contextmanager
def executed_instances(prefix: str) -> Iterator[None]:
    """BFCL keeps the API instances of each run in a module's globals, named after the model
    name it was given; forget every one whose name starts with ``prefix`` when the block ends,
    so a later run of the same case starts from the case's initial state."""
    instances = checkers().instances
    try:
        yield
    finally:
        for name in [n for n in instances if n.startswith(prefix)]:
            del instances[name]


def check_multi_turn(
    case: BfclCase, steps_per_turn: Sequence[Sequence[Sequence[Call]]], *, model_name: str
) -> CheckVerdict:
    """BFCL's verdict on a multi-turn run: per turn, the calls of each step that had any.

    A run that stopped before its last turn (``len(steps_per_turn)`` short of the turns) is
    BFCL's "force-terminated" failure.
    """
    if len(steps_per_turn) != len(case.turns):
        return CheckVerdict(
            valid=False,
            error_type="multi_turn:force_terminated",
            errors=(
                f"the run answered {len(steps_per_turn)} of the case's {len(case.turns)} turns",
            ),
        )
    decoded = [
        [[as_python_call(c) for c in step] for step in turn if step] for turn in steps_per_turn
    ]
    entry = {
        "id": case.id,
        "initial_config": case.initial_config,
        "involved_classes": list(case.involved_classes),
    }
    with executed_instances(model_name):
        result = checkers().multi_turn_checker(
            decoded, case.ground_truth, entry, case.category, model_name
        )
    return CheckVerdict.of(result)

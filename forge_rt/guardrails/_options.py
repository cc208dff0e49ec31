"""Which guardrails are on, and how much each may absorb: one typed struct for every front door.

The runtime (``Session``, ``WorkflowRunner``), the eval's ablations and the middleware facade all
take a :class:`GuardrailOptions`, so an option is spelled, defaulted and checked in one place.
"""

from __future__ import annotations

import msgspec

from forge_rt.errors import ConfigurationError

__all__ = ["GuardrailOptions"]


class GuardrailOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Switches and budgets of the :class:`~forge_rt.guardrails.Guardrails`.

    Switches (the eval's ablations turn them off): ``rescue`` reads calls written as text (off:
    native calls only); ``retry_nudges`` answers a reply without a call with a corrective nudge
    (off: the text is the answer); ``steps`` enforces required steps and prerequisites;
    ``recovery`` feeds tool failures back (off: the first failure ends the run); ``loop_repeats``
    is how often the same call may repeat before the loop guard steps in (``None``: no guard);
    ``exclude_looping`` keeps a call the loop guard blocked out of the next constraint where the
    tool itself must stay callable (docs/loop-exclusion.md). Off by default, as measured: on the
    embedded 0.5B it rescued none of the runs that ended in ToolLoopError, and made each of them
    run to max_iterations instead of failing after four replies. ``exclude_refused`` keeps a
    call that would be refused again out of the turn's later constraints: one the validator
    refused, and one whose tool refused its arguments, until a call succeeds (see
    :mod:`forge_rt.guardrails._refused`). Off by default, as measured: on the embedded 0.5B the
    whole suite scored the same with it (60/90, 3 gained, 3 lost; docs/eval/hints/README.md),
    barred values were perturbed ("Ilse Brant") rather than corrected, and two failing runs
    ran to max_iterations instead. ``ground_answers`` sends back,
    once per turn, a ``respond`` answer that shares no word or number with the turn's tool
    results (see :mod:`forge_rt.guardrails._grounding`), or one that leaves out what the end of
    a lookup chain found; with ``answer_from_results`` the answer after such a refusal is
    constrained to one of those results, verbatim (``Guardrails.answer_choices``: the real
    0.5B, told its answer left out the email it had looked up, wrote the same answer again).
    ``ground_arguments`` sends back, once per value and turn, a call whose id, path or
    fractional number appears nowhere in the prompt, the requests or the results, where a
    same-shaped value the run was given or a pending required step says where the real one
    comes from (see :mod:`forge_rt.guardrails._guesses`: the real 0.5B completed todo 1
    before listing the todos, 3 runs of 3). ``cover_lists`` sends back, once per
    turn, a terminal call made while an item of a listed fan-out ("Turku or Lima", a result's
    "K-7, K-8") was never sent to the tool that ran for its sibling (see
    :mod:`forge_rt.guardrails._coverage`), or while a number the request gives ("180 euros")
    reached no tool and a call that takes one ran (see :mod:`forge_rt.guardrails._quantities`).

    Shape of a reply (both off by default; the proxy turns them on, see
    ``ProxyConfig``): ``call_list`` writes a constrained reply as a JSON list of one call or
    more, so after each call the model chooses between another and the end (see
    :func:`~forge_rt.guardrails.tool_call_schema`); ``prose_answers`` takes a reply of plain
    text with no call in it as the answer, where the caller allows one, and, under a grammar,
    makes such text a branch of the constraint (see
    :func:`~forge_rt.guardrails.tool_call_grammar`). Text that echoes a correction or holds a
    broken call is still sent back. ``unfounded_calls`` sends back, once per turn, a reply
    whose every call is made of values the model was never given, where a text answer was open
    (see :mod:`forge_rt.guardrails._unfounded`): asked what no tool does, a small model calls
    one anyway with values of its own.

    Budgets, each counting rejected replies in a row before the run ends with its typed error:
    ``max_retries`` (no usable call), ``max_tool_errors`` (failing tools), ``max_premature``
    (terminal tool too early), ``max_prereq`` (prerequisite missing).
    """

    rescue: bool = True
    retry_nudges: bool = True
    steps: bool = True
    recovery: bool = True
    max_retries: int = 3
    max_tool_errors: int = 2
    max_premature: int = 3
    max_prereq: int = 3
    loop_repeats: int | None = 3
    exclude_looping: bool = False
    exclude_refused: bool = False
    ground_answers: bool = True
    answer_from_results: bool = True
    ground_arguments: bool = True
    cover_lists: bool = True
    call_list: bool = False
    prose_answers: bool = False
    unfounded_calls: bool = False

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

    @classmethod
    def off(cls) -> GuardrailOptions:
        """Every guardrail off: the model's raw behaviour (the eval's ``bare`` arm)."""
        return cls(
            rescue=False,
            retry_nudges=False,
            steps=False,
            recovery=False,
            loop_repeats=None,
            ground_answers=False,
            answer_from_results=False,
            cover_lists=False,
        )

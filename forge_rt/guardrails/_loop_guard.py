"""The loop guard: stop a model that sends the same call, reply after reply.

Small models stuck in a loop re-send one call with the same arguments until the iteration cap.
The guard counts, per distinct call (tool + canonical arguments), how many checked replies in a
row contained it. At ``max_repeats`` the reply is blocked with a tool-channel correction; one
more identical reply raises :class:`~forge_rt.errors.ToolLoopError`. Identical calls *within*
one reply are collapsed by the validator and count once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from actors import quiet_logger
from forge_rt.core import MessageType, Role, ToolCall
from forge_rt.errors import ToolLoopError
from forge_rt.guardrails._actions import StepBlocked
from forge_rt.guardrails._nudges import Nudge, loop_nudge
from forge_rt.guardrails._steps import blocked_batch
from forge_rt.guardrails._validator import CallKey, call_key

__all__ = ["LoopGuard"]

log = quiet_logger(__name__)


class LoopGuard:
    """Counts consecutive replies that repeat a call; nudges at ``max_repeats``, then raises.

    ``max_repeats=3``: the first two identical replies run, the third is blocked with a loop
    nudge, a fourth in a row raises :class:`ToolLoopError`. A reply without the call breaks its
    row. Only replies passed to :meth:`observe` count.
    """

    def __init__(self, max_repeats: int = 3) -> None:
        if max_repeats < 2:
            raise ValueError(
                f"max_repeats must be >= 2 (1 would block every call), got {max_repeats}"
            )
        self.max_repeats = max_repeats
        self._streaks: dict[CallKey, int] = {}
        self._calls: dict[CallKey, ToolCall] = {}  # the last observed reply's calls, by key

    def streak(self, call: ToolCall) -> int:
        """How many observed replies in a row contained ``call``."""
        return self._streaks.get(call_key(call), 0)

    @property
    def blocked(self) -> tuple[ToolCall, ...]:
        """The calls at the limit: blocked in the last observed reply, and one more of any of
        them in the next raises :class:`ToolLoopError`. A constraint leaves them out."""
        return tuple(
            call for key, call in self._calls.items() if self._streaks[key] >= self.max_repeats
        )

    @property
    def longest_streak(self) -> int:
        """The longest current row of any call (0 when nothing has been observed)."""
        return max(self._streaks.values(), default=0)

    def observe(
        self,
        calls: Sequence[ToolCall],
        *,
        text: str = "",
        next_step: Callable[[str], str] | None = None,
        failed_with: Callable[[ToolCall], str | None] | None = None,
    ) -> StepBlocked | None:
        """Count this reply's calls; a blocked batch at the limit, ``None`` when it may run.
        Raises :class:`ToolLoopError` past the limit. ``next_step`` names the call that moves
        the task on (given the stuck tool); ``failed_with`` the error a call last failed with,
        which the nudge then quotes instead."""
        streaks = {k: self._streaks.get(k, 0) + 1 for k in dict.fromkeys(map(call_key, calls))}
        self._streaks = streaks
        self._calls = {call_key(c): c for c in calls}
        over = [c for c in calls if streaks[call_key(c)] > self.max_repeats]
        if over:
            call = over[0]
            repeats = streaks[call_key(call)]
            args = msgspec.json.encode(call.args, order="sorted").decode()
            log.warning("guardrails.loop_exhausted", tool=call.tool, repeats=repeats)
            raise ToolLoopError(
                f"the model called {call.tool!r} with {args} {repeats} times in a row despite a "
                f"loop warning (limit {self.max_repeats}). The task is not progressing: check "
                "that the tool's result tells the model what to do next",
                tool=call.tool,
                args_repr=args,
                repeats=repeats,
            )
        looping = [c for c in calls if streaks[call_key(c)] == self.max_repeats]
        if not looping:
            return None
        errors = [
            Nudge(
                kind=MessageType.STEP_NUDGE,
                role=Role.TOOL,
                content=loop_nudge(
                    c.tool,
                    c.args,
                    self.max_repeats,
                    next_step(c.tool) if next_step else "",
                    failed_with=failed_with(c) if failed_with else None,
                ),
                call_id=c.call_id,
                tool=c.tool,
                tier=3,
            )
            for c in looping
        ]
        log.info("guardrails.loop", tool=looping[0].tool, repeats=self.max_repeats)
        return blocked_batch(calls, errors, "loop", kind=MessageType.STEP_NUDGE, tier=3, text=text)

    def reset(self) -> None:
        """Forget every row (a new task starts)."""
        self._streaks = {}
        self._calls = {}

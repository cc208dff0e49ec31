"""ContextManager: keeps one history under its token budget, and says when it gets close.

The workflow actor calls :meth:`ContextManager.maybe_compact` before every inference. When the
estimate is over ``budget * threshold`` the strategy cuts the history toward that line and a
:class:`CompactEvent` records what happened. Threshold callbacks let the runtime react to pressure
(warn the user, tell the BudgetActor); the BudgetActor may change ``budget_tokens`` at any time and
the next call uses the new value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import msgspec

from actors import quiet_logger
from forge_rt.context._compact import CompactStrategy, TieredCompact
from forge_rt.context._estimate import TokenEstimator
from forge_rt.core import Message

__all__ = ["CompactEvent", "ContextManager", "ContextUsage", "ThresholdCallback"]

log = quiet_logger(__name__)


class ContextUsage(msgspec.Struct, frozen=True, kw_only=True):
    """How full the context is: estimated ``tokens`` of ``budget``, and their ratio."""

    tokens: int
    budget: int
    fraction: float


class CompactEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A record of one compaction: what was cut, by which strategy, against which budget.

    Token counts are estimated prompt sizes (messages plus the estimator's learned offset).
    ``target`` is the token line the strategy aimed under (``budget * threshold``); ``phase`` is
    the strategy's escalation level (0: it could cut nothing). ``iteration`` is the loop iteration
    the caller passed, when it passed one.
    """

    phase: int
    tokens_before: int
    tokens_after: int
    budget: int
    target: int
    dropped: int
    truncated: int
    strategy: str
    iteration: int | None = None


ThresholdCallback = Callable[[ContextUsage], None]


class _Watch:
    __slots__ = ("armed", "callback", "fraction")

    def __init__(self, fraction: float, callback: ThresholdCallback) -> None:
        self.fraction = fraction
        self.callback = callback
        self.armed = True


_DEFAULT_STRATEGY = TieredCompact()


class ContextManager:
    """Compacts a history when it passes ``budget_tokens * threshold``, and watches thresholds.

    ``estimator`` defaults to a fresh :class:`TokenEstimator`; share one that a backend has
    calibrated. Not thread-safe; within trio, one task (the workflow actor) should own it, and
    setting ``budget_tokens`` from another task is fine.
    """

    def __init__(
        self,
        budget_tokens: int,
        strategy: CompactStrategy = _DEFAULT_STRATEGY,
        *,
        threshold: float = 0.75,
        estimator: TokenEstimator | None = None,
    ) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"ContextManager threshold must be in (0, 1], got {threshold!r}")
        self._budget = _checked_budget(budget_tokens)
        self._threshold = threshold
        self.strategy = strategy
        self.estimator = estimator if estimator is not None else TokenEstimator()
        self._watches: list[_Watch] = []

    @property
    def budget_tokens(self) -> int:
        """The context budget in tokens; set it to change the budget from the next call on."""
        return self._budget

    @budget_tokens.setter
    def budget_tokens(self, value: int) -> None:
        self._budget = _checked_budget(value)

    @property
    def threshold(self) -> float:
        """Fraction of the budget above which the history is compacted."""
        return self._threshold

    @property
    def target_tokens(self) -> int:
        """The token line compaction triggers above and aims under: ``budget * threshold``."""
        return math.floor(self._budget * self._threshold)

    def usage(self, messages: Sequence[Message]) -> ContextUsage:
        """How full the context is with ``messages``; fires no callback.

        Tokens are the estimator's ``count_prompt``: the prompt's part outside the messages (tool
        schemas), as learned from usage, counts too.
        """
        tokens = self.estimator.count_prompt(messages)
        return ContextUsage(tokens=tokens, budget=self._budget, fraction=tokens / self._budget)

    def on_threshold(self, fraction: float, callback: ThresholdCallback) -> None:
        """Call ``callback(usage)`` once when usage reaches ``fraction`` of the budget.

        It fires during :meth:`maybe_compact`, on the usage the history reached before any cut,
        and re-arms once usage (after the cut) is below ``fraction`` again. Callbacks run inline,
        lowest fraction first, in registration order; they must be quick, and what they raise
        propagates to the caller of :meth:`maybe_compact`.
        """
        if not (fraction > 0 and math.isfinite(fraction)):
            raise ValueError(f"on_threshold fraction must be a positive number, got {fraction!r}")
        self._watches.append(_Watch(fraction, callback))
        self._watches.sort(key=lambda w: w.fraction)

    def maybe_compact(
        self, messages: Sequence[Message], *, iteration: int | None = None
    ) -> tuple[list[Message], CompactEvent | None]:
        """The history to send: compacted if it is over the target, else as it is.

        Returns the messages and a :class:`CompactEvent` when the strategy ran (even if it could
        cut nothing), ``None`` when the history was under the target.
        """
        usage = self.usage(messages)
        self._fire(usage)
        target = self.target_tokens
        if usage.tokens <= target:
            self._rearm(usage.fraction)
            return list(messages), None
        # Strategies count messages only; the prompt's part outside them is not theirs to cut.
        offset = self.estimator.offset_tokens
        result = self.strategy.compact(messages, target - offset, self.estimator)
        event = CompactEvent(
            phase=result.phase,
            tokens_before=result.tokens_before + offset,
            tokens_after=result.tokens_after + offset,
            budget=self._budget,
            target=target,
            dropped=result.dropped,
            truncated=result.truncated,
            strategy=type(self.strategy).__name__,
            iteration=iteration,
        )
        log.info(
            "context compacted",
            phase=event.phase,
            tokens_before=event.tokens_before,
            tokens_after=event.tokens_after,
            budget=event.budget,
            target=event.target,
            dropped=event.dropped,
            truncated=event.truncated,
            strategy=event.strategy,
            iteration=iteration,
        )
        self._rearm(event.tokens_after / self._budget)
        return result.messages, event

    def _fire(self, usage: ContextUsage) -> None:
        for watch in self._watches:
            if watch.armed and usage.fraction >= watch.fraction:
                watch.armed = False
                watch.callback(usage)

    def _rearm(self, fraction: float) -> None:
        for watch in self._watches:
            if not watch.armed and fraction < watch.fraction:
                watch.armed = True


def _checked_budget(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"budget_tokens must be a positive int, got {value!r}")
    return value

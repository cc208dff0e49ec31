"""Interrupt a piece of work at every scheduling step and check that it leaves nothing behind.

A resource leaks on cancellation only when the cancellation lands at one particular checkpoint
(the body write, the first chunk, the gap between two reads). Instead of guessing that moment,
:func:`sweep_steps` replays the work with the interruption moved one trio scheduling step later
each time, from the first step until the work finishes before the interruption comes. After
every replay it collects garbage and fails on any ``ResourceWarning`` it caught: an async
generator finalised unexhausted (trio's warning), an unclosed socket or file.

Nothing here sleeps or reads a clock: steps are counted by a trio ``Instrument``.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import trio
import trio.lowlevel

__all__ = [
    "LiveTasks",
    "StepTrigger",
    "cancel_at_every_step",
    "installed",
    "nothing_left_behind",
    "sweep_steps",
]


class StepTrigger(trio.abc.Instrument):
    """Runs ``action`` once, just before the ``at``-th task step it counts.

    It counts the steps of ``task`` only, or of every task when ``task`` is ``None``.
    ``fired`` says whether the moment came.
    """

    def __init__(
        self, at: int, action: Callable[[], object], task: trio.lowlevel.Task | None = None
    ) -> None:
        self._at = at
        self._action = action
        self._task = task
        self._steps = 0
        self.fired = False

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.fired or (self._task is not None and task is not self._task):
            return
        self._steps += 1
        if self._steps == self._at:
            self.fired = True
            self._action()


class LiveTasks(trio.abc.Instrument):
    """The tasks spawned while it is installed that have not exited (empty: none left)."""

    def __init__(self) -> None:
        self.alive: set[trio.lowlevel.Task] = set()

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.alive.add(task)

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.alive.discard(task)


@contextmanager
def installed(instrument: trio.abc.Instrument) -> Iterator[None]:
    """``instrument`` active for the block."""
    trio.lowlevel.add_instrument(instrument)
    try:
        yield
    finally:
        trio.lowlevel.remove_instrument(instrument)


async def sweep_steps(replay: Callable[[int], Awaitable[bool]], *, limit: int = 20_000) -> int:
    """Run ``replay(k)`` for k = 1, 2, ... until it returns ``False``; return how many ran.

    ``replay(k)`` does the work once with its interruption at step ``k`` and returns whether
    the interruption came before the work was done. Each replay must leave no
    ``ResourceWarning`` once garbage is collected.
    """
    with nothing_left_behind("after the whole sweep"):
        for step in range(1, limit + 1):
            # The young generations only: a full collection per replay would make a sweep of a
            # few hundred replays take seconds; the full one at the end misses nothing.
            with nothing_left_behind(f"interrupted at step {step}", generation=1):
                interrupted = await replay(step)
            if not interrupted:
                return step
    raise AssertionError(f"the work was still being interrupted at step {limit}")


@contextmanager
def nothing_left_behind(what: str, *, generation: int = 2) -> Iterator[None]:
    """Fail if the block leaves a ``ResourceWarning`` once garbage (up to ``generation``) is
    collected."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
        gc.collect(generation)
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == [], f"{what}, the work left behind: {leaks}"


async def cancel_at_every_step(
    call: Callable[[], Awaitable[object]], *, every_task: bool = False
) -> int:
    """Cancel ``call()`` at each of its own steps in turn (see :func:`sweep_steps`).

    With ``every_task`` the steps of every task count (a server in the same process, the
    actors the call talks to), so the cancellation also lands at each step of the other side.
    Returns how many replays ran (the last one finished uncancelled). A cancelled call must end
    in ``Cancelled``; any other exception fails the sweep.
    """
    task = None if every_task else trio.lowlevel.current_task()

    async def replay(step: int) -> bool:
        with trio.CancelScope() as scope, installed(StepTrigger(step, scope.cancel, task)):
            await call()
        return scope.cancelled_caught

    return await sweep_steps(replay)

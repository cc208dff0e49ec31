"""What a slot's actors say to each other: the handle, the scheduler and its executors.

The handle submits a job and is told whether the queue took it; the scheduler hands an executor
one attempt; the executor reports how the attempt ended (one of the ``_Outcome`` kinds), and the
scheduler decides from that what the job does next. ``Recheck`` is the one public message:
whoever changes the admission test (a budget) asks the scheduler to look at its queue again
(``SlotWorker.recheck``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from actors import ActorRef
from forge_rt.core import LLMResponse
from forge_rt.errors import BackendError, SlotQueueFullError
from forge_rt.runtime._scheduling import InferenceJob

__all__ = ["Recheck"]


class _Submit(msgspec.Struct):
    job: InferenceJob


class _Accepted(msgspec.Struct):
    pass


class _Rejected(msgspec.Struct):
    error: SlotQueueFullError


class _RunJob(msgspec.Struct):
    job: InferenceJob


class _Completed(msgspec.Struct):
    response: LLMResponse


class _Preempted(msgspec.Struct):
    partial_text: str
    continuable: bool
    tokens: int  # tokens this attempt streamed before it was cut


class _CutOff(msgspec.Struct):
    """The backend closed the stream mid-reply (a restart, a crash), after part of it reached
    the caller: continued from the partial text, or restarted, like a preemption."""

    error: BackendError
    partial_text: str
    continuable: bool
    tokens: int


class _Abandoned(msgspec.Struct):
    pass


class _Failed(msgspec.Struct):
    error: BaseException


_Outcome = _Completed | _Preempted | _CutOff | _Abandoned | _Failed


class _AttemptDone(msgspec.Struct):
    job: InferenceJob
    outcome: _Outcome
    executor: ActorRef[Any]


class _GetStats(msgspec.Struct):
    pass


class Recheck(msgspec.Struct):
    """Ask the scheduler to look at its queue again (a budget changed, room may have freed)."""

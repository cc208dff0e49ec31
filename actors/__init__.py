"""A small, general actor kernel on trio.

An actor is a trio task with a bounded mailbox; an ``ActorRef`` sends to it (``send``, tell)
or asks it (``ask``, request/reply with timeout and cancellation). Actors live in a
supervision tree rooted in ``ActorSystem``'s nursery: restart policies, restart intensity,
escalation, and graceful (drain) or immediate (cancel) stops. No accepted message is dropped
silently: it is handled, returned by ``stop(mode="cancel")``, or recorded as a dead letter,
and an ask that will not be answered raises in its asker.

    class Counter(Actor):
        def __init__(self) -> None:
            self.count = 0

        @handles(Add)
        async def on_add(self, msg: Add) -> int:
            self.count += msg.n
            return self.count

    async with ActorSystem.open() as system:
        counter = await system.spawn(Counter, name="counter")
        assert await counter.ask(Add(2)) == 2
"""

from ._actor import Actor as Actor
from ._actor import handles as handles
from ._context import ActorContext as ActorContext
from ._errors import ActorCrashedError as ActorCrashedError
from ._errors import ActorError as ActorError
from ._errors import ActorNotFoundError as ActorNotFoundError
from ._errors import ActorStoppedError as ActorStoppedError
from ._errors import AskTimeoutError as AskTimeoutError
from ._errors import DuplicateActorNameError as DuplicateActorNameError
from ._errors import EscalationError as EscalationError
from ._errors import MailboxFullError as MailboxFullError
from ._errors import SystemClosedError as SystemClosedError
from ._errors import UnhandledMessageError as UnhandledMessageError
from ._lifecycle import DeadLetter as DeadLetter
from ._lifecycle import StopKind as StopKind
from ._lifecycle import StopMode as StopMode
from ._lifecycle import StopReason as StopReason
from ._lifecycle import Terminated as Terminated
from ._logging import QuietLogger as QuietLogger
from ._logging import quiet_logger as quiet_logger
from ._mailbox import DEFAULT_CAPACITY as DEFAULT_CAPACITY
from ._mailbox import FifoMailbox as FifoMailbox
from ._mailbox import Mailbox as Mailbox
from ._mailbox import PriorityMailbox as PriorityMailbox
from ._ref import ActorRef as ActorRef
from ._supervision import Backoff as Backoff
from ._supervision import RestartPolicy as RestartPolicy
from ._system import ActorSystem as ActorSystem
from ._system import Watcher as Watcher

__all__ = [
    "DEFAULT_CAPACITY",
    "Actor",
    "ActorContext",
    "ActorCrashedError",
    "ActorError",
    "ActorNotFoundError",
    "ActorRef",
    "ActorStoppedError",
    "ActorSystem",
    "AskTimeoutError",
    "Backoff",
    "DeadLetter",
    "DuplicateActorNameError",
    "EscalationError",
    "FifoMailbox",
    "Mailbox",
    "MailboxFullError",
    "PriorityMailbox",
    "QuietLogger",
    "RestartPolicy",
    "StopKind",
    "StopMode",
    "StopReason",
    "SystemClosedError",
    "Terminated",
    "UnhandledMessageError",
    "Watcher",
    "handles",
    "quiet_logger",
]

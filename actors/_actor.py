"""The ``Actor`` base class and the ``@handles`` decorator that routes messages to methods."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ._errors import UnhandledMessageError
from ._lifecycle import StopReason

if TYPE_CHECKING:
    from ._context import ActorContext

__all__ = ["Actor", "handles"]

_HandlerT = TypeVar("_HandlerT", bound=Callable[..., Awaitable[Any]])
Handler = Callable[[Any, Any], Awaitable[Any]]

_HANDLES_ATTR = "__actor_handles__"


def handles(*message_types: type) -> Callable[[_HandlerT], _HandlerT]:
    """Mark an ``async def`` method of an ``Actor`` as the handler for ``message_types``.

    Dispatch follows the message's MRO: a handler for ``Base`` also receives subclasses of
    ``Base`` that have no handler of their own. The method's return value is the reply to an
    ``ask`` (ignored for a ``send``).
    """
    if not message_types:
        raise TypeError("@handles() needs at least one message type, e.g. @handles(Ping)")
    for tp in message_types:
        if not isinstance(tp, type):
            raise TypeError(f"@handles() takes message classes, got {tp!r}")

    def mark(method: _HandlerT) -> _HandlerT:
        is_async = inspect.iscoroutinefunction(method)
        if not is_async:
            raise TypeError(
                f"@handles() needs an `async def` method; {method.__qualname__} is not async"
            )
        setattr(method, _HANDLES_ATTR, (*getattr(method, _HANDLES_ATTR, ()), *message_types))
        return method

    return mark


class Actor:
    """Base class for actors: subclass it, add ``@handles`` methods, spawn it with a factory.

    The kernel calls ``on_start`` before the first message of each incarnation and
    ``on_stop`` after the last one (after a graceful stop, a cancel, and after a crash before
    a restart). Messages are handled one at a time, in mailbox order, so handlers need no
    locks for the actor's own state. A restart builds a fresh instance from the factory, so
    state resets; the mailbox is kept.
    """

    # message type -> method name, merged along the MRO (so overriding a handler works)
    _actor_handlers: ClassVar[dict[type, str]] = {}
    # message type -> function, filled on first use of each message type
    _actor_dispatch: ClassVar[dict[type, Handler]] = {}
    _actor_context: ActorContext | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Walk the whole MRO (base first, so subclasses win), which also picks up handlers
        # defined on plain mixin classes.
        merged: dict[type, str] = {}
        for klass in reversed(cls.__mro__):
            own: dict[type, str] = {}
            for attr, value in vars(klass).items():
                for message_type in getattr(value, _HANDLES_ATTR, ()):
                    if message_type in own:
                        raise TypeError(
                            f"{klass.__qualname__} handles {message_type.__qualname__} twice, "
                            f"in {own[message_type]}() and {attr}(); keep one"
                        )
                    own[message_type] = attr
            merged.update(own)
        cls._actor_handlers = merged
        cls._actor_dispatch = {}

    @property
    def context(self) -> ActorContext:
        """This actor's link to the system: its ref, spawn children, watch, stop itself."""
        context = self._actor_context
        if context is None:
            raise RuntimeError(
                f"{type(self).__qualname__}.context is set when the actor is spawned; "
                "use it in on_start() or in handlers, not in __init__"
            )
        return context

    async def on_start(self) -> None:
        """Called before this incarnation handles its first message. Raising here is a crash."""

    async def on_stop(self, reason: StopReason) -> None:
        """Called once this incarnation handles no more messages, with why.

        Children have been stopped already. When the whole system is torn down by
        cancellation, this runs in a cancelled context: use a shielded cancel scope (with a
        timeout) for async cleanup that must finish.
        """

    @classmethod
    def _resolve_handler(cls, message_type: type, actor_name: str) -> Handler:
        """Find the handler for ``message_type`` along its MRO, and cache it."""
        handlers = cls._actor_handlers
        for candidate in message_type.__mro__:
            method_name = handlers.get(candidate)
            if method_name is not None:
                handler: Handler = getattr(cls, method_name)
                cls._actor_dispatch[message_type] = handler
                return handler
        raise UnhandledMessageError(actor_name, cls, message_type, list(handlers))

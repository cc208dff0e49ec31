"""``forge-rt eval --suite bfcl``: BFCL cases through the proxy, in front of a real model.

Command-line code, called by :mod:`forge_rt.eval._cli` once the options are parsed: it starts
the embedded model (``--backend local``) or names a server (a URL), runs the cases that the
results file lacks (:func:`forge_rt.eval.bfcl.run_bfcl`), records the invocation in the sidecar
and prints the tables. Sampling is BFCL's: greedy (temperature 0), whatever the model card says.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click
import trio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from forge_rt import __version__
from forge_rt._cli_options import DEFAULT_N_CTX
from forge_rt.core import LLMClient
from forge_rt.errors import ConfigurationError
from forge_rt.eval._ablation import ablation
from forge_rt.eval._meta import Invocation, read_meta, recording, source_commit, utc_now
from forge_rt.eval._record import RunRecord
from forge_rt.eval._split import SplitName
from forge_rt.proxy import BackendConfig

if TYPE_CHECKING:
    from forge_rt.clients import ClientKind

__all__ = ["BfclOptions", "run_bfcl_command"]

_DEFAULT_PER_CATEGORY = 40


class BfclOptions:
    """The parsed options of one BFCL invocation."""

    def __init__(
        self,
        *,
        backend: str,
        backend_kind: str,
        backend_api_key: str | None,
        model: str | None,
        n_ctx: int,
        runs: int,
        ablations: Sequence[str],
        out: Path,
        split: SplitName,
        categories: Sequence[str],
        per_category: int | None,
        seed: int,
        command: str,
        route: str = "proxy",
        case_ids: Sequence[str] = (),
    ) -> None:
        self.backend = backend
        self.backend_kind = backend_kind
        self.backend_api_key = backend_api_key
        self.model = model
        self.n_ctx = n_ctx
        self.runs = runs
        self.ablations = list(ablations) or ["full"]
        self.out = out
        self.split = split
        self.categories = list(categories)
        self.per_category = per_category or _DEFAULT_PER_CATEGORY
        self.seed = seed
        self.command = command
        self.route = route
        self.case_ids = list(case_ids)
        """Only these of the cases drawn (none: all of them)."""


def _model_label(options: BfclOptions) -> tuple[str, str]:
    """The (backend label, model) the records carry."""
    if options.backend == "sim":
        raise click.UsageError(
            "--suite bfcl measures a model: give --backend local or a server's URL (the sim "
            "answers from scripts, which BFCL's cases have none of)"
        )
    if options.backend == "local":
        from forge_rt.backends.local import MODELS

        chosen = options.model or next(iter(MODELS))
        if chosen not in MODELS:
            raise click.BadParameter(
                f"{chosen!r} is not an embedded model; choose one of {', '.join(MODELS)}",
                param_hint="--model",
            )
        return "local", chosen
    if not options.backend.startswith(("http://", "https://")):
        raise click.BadParameter(
            f"{options.backend!r} is neither local nor an http(s):// base URL",
            param_hint="--backend",
        )
    if options.model is None:
        raise click.UsageError("--model is required with a URL backend: it names the served model")
    return options.backend.rstrip("/"), options.model


def _only(cases: list[Any], ids: Sequence[str]) -> list[Any]:
    """The cases named by ``ids``, in drawing order; an id not among those drawn is a usage
    error that says which were drawn."""
    drawn = {case.id for case in cases}
    missing = [i for i in ids if i not in drawn]
    if missing:
        shown = ", ".join(sorted(drawn)[:6])
        raise click.BadParameter(
            f"{', '.join(missing)} not among the {len(drawn)} cases drawn (the split, "
            f"--categories and --per-category choose them; e.g. {shown})",
            param_hint="--scenarios",
        )
    wanted = set(ids)
    return [case for case in cases if case.id in wanted]


def _settings(options: BfclOptions, label: str, model: str) -> dict[str, Any]:
    from forge_rt.eval.bfcl import BFCL_VERSION

    return {
        "backend": label,
        "backend_kind": "llamaserver" if options.backend == "local" else options.backend_kind,
        "model": model,
        "sampling": {"temperature": 0.0},
        "suite": f"bfcl {BFCL_VERSION}",
        "route": options.route,
    }


async def _run(
    options: BfclOptions,
    plan: Any,
    on_start: Callable[[str, Any, int], None],
    on_record: Callable[[RunRecord, int, int], None],
) -> list[RunRecord]:
    from forge_rt.clients import LlamaServerClient, make_client
    from forge_rt.eval.bfcl import run_bfcl

    async with AsyncExitStack() as stack:
        client: LLMClient | None = None
        if options.backend == "local":
            from forge_rt.backends.local import LocalModelServer

            server = await stack.enter_async_context(
                LocalModelServer.start(plan.model, n_ctx=options.n_ctx or DEFAULT_N_CTX)
            )
            backend = BackendConfig(url=server.url, kind="llamaserver")
            if options.route == "runtime":
                # As the own suite's runs use the embedded model: raw generation.
                client = LlamaServerClient(server.url, generation="raw")
        else:
            backend = BackendConfig(
                url=options.backend,
                kind=options.backend_kind,  # click.Choice admitted only backend kinds
                api_key=options.backend_api_key,
                model=options.model,
            )
            if options.route == "runtime":
                kind = cast("ClientKind", options.backend_kind)
                extra: dict[str, object] = {"model": options.model}
                if options.backend_api_key is not None and kind != "ollama":
                    extra["api_key"] = options.backend_api_key
                client = make_client(kind, options.backend, **extra)
        if client is not None:
            client = await stack.enter_async_context(client)  # type: ignore[arg-type]
        return await run_bfcl(plan, backend, client=client, on_start=on_start, on_record=on_record)


def run_bfcl_command(options: BfclOptions) -> list[RunRecord]:
    """Run the invocation; returns every record of the results file for the report."""
    from forge_rt.eval._record import read_records

    try:
        from forge_rt.eval.bfcl import SINGLE_TURN, BfclPlan, check_ablation, sample_cases

        cases = sample_cases(
            options.categories or SINGLE_TURN,
            options.per_category,
            split=options.split,
            seed=options.seed,
        )
    except ConfigurationError as exc:
        raise click.ClickException(str(exc)) from None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--categories") from None
    if options.case_ids:
        cases = _only(cases, options.case_ids)
    label, model = _model_label(options)
    probe = BackendConfig(
        url="http://127.0.0.1:1",
        kind="llamaserver" if options.backend == "local" else options.backend_kind,
        model=model,
    )
    for name in options.ablations:
        try:
            if options.route == "runtime":
                ablation(name)
            else:
                check_ablation(name, probe)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--ablation") from None
    settings = _settings(options, label, model)
    meta = read_meta(options.out)
    clash = meta.conflicting(settings)
    if clash is not None:
        raise click.UsageError(
            f"{options.out} already holds {label}/{model} runs made with other settings (by "
            f"`{clash.command}`); pass another --out"
        )
    plan = BfclPlan(
        backend=label,
        model=model,
        cases=cases,
        ablations=options.ablations,
        runs=options.runs,
        out=options.out,
        served_model=model,
        route=options.route,  # type: ignore[arg-type]  # click.Choice admitted only routes
    )
    errors = Console(stderr=True, highlight=False, soft_wrap=True)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    errors.print(
        f"eval: {len(cases)} BFCL cases ({options.split}) x {len(options.ablations)} ablations "
        f"x {options.runs} runs on {label} ({model})",
        markup=False,
    )
    invocation = Invocation(
        command=options.command,
        started=utc_now(),
        settings=settings,
        scenarios=[c.id for c in cases],
        ablations=options.ablations,
        runs=options.runs,
        version=__version__,
        commit=source_commit(),
    )
    new: list[RunRecord] = []
    with (
        recording(options.out, meta, invocation, new) as outcome,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=errors,
            disable=not errors.is_terminal,
        ) as progress,
    ):
        task = progress.add_task("starting", total=None)

        def started(ablation: str, case: Any, run: int) -> None:
            progress.update(task, description=f"{ablation} {case.id} #{run + 1}")

        def recorded(record: RunRecord, index: int, total: int) -> None:
            new.append(record)
            progress.update(task, completed=index, total=total)

        trio.run(_run, options, plan, started, recorded)
    failure = outcome.failure
    errors.print(
        f"ran {len(new)} cases: {sum(r.correct for r in new)} valid by BFCL's checkers",
        markup=False,
    )
    if failure is not None:
        raise click.ClickException(
            f"the backend failed: {type(failure).__name__}: {failure}\n{len(new)} cases of this "
            f"invocation are saved in {options.out}; run the same command again to resume"
        ) from failure
    return list(read_records(options.out))

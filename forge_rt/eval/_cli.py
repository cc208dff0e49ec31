"""``forge-rt eval``: run the scenario suite against a backend; ``forge-rt eval report``.

Command-line code: it prints through rich (the table to stdout, the progress bar to stderr).
``eval_command`` is the click group the main CLI adds; running it without a subcommand runs an
eval, ``eval report`` renders results that are already on disk.

Results go to a JSONL file (one record per run, appended as each run ends, so an interrupted
eval keeps its work and the same command resumes it); the exact command line and the settings
of every invocation go to the sidecar ``<out>.meta.json`` (see :mod:`forge_rt.eval._meta`).
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click
import msgspec
import trio
from click.core import ParameterSource
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from forge_rt import __version__
from forge_rt._cli_options import (
    DEFAULT_N_CTX,
    backend_api_key_option,
    backend_kind_option,
    backend_option,
    command_settings,
    config_option,
    env_epilog,
    given,
    model_option,
    n_ctx_option,
    seed_option,
)
from forge_rt.backends.sim import FailureRates
from forge_rt.core import LLMClient, Sampling
from forge_rt.errors import ForgeError
from forge_rt.eval._ablation import ABLATIONS, Ablation, ablation
from forge_rt.eval._meta import (
    Invocation,
    meta_path,
    read_meta,
    recording,
    source_commit,
    utc_now,
)
from forge_rt.eval._presets import DEFAULT_SIM_RATES, SIM_RATE_PRESETS, parse_sim_rates
from forge_rt.eval._record import RunRecord, read_records
from forge_rt.eval._report import (
    DEFAULT_GROUP_BY,
    GROUP_FIELDS,
    build_report,
    format_p,
    render_html,
    report_table,
)
from forge_rt.eval._rule_audit import fired_in, rule_audit
from forge_rt.eval._runner import EvalPlan, lines_for, pending_runs, run_eval, sim_client
from forge_rt.eval._scenario import Scenario, select_from
from forge_rt.eval._split import SPLITS, SplitName, split_of, take_split

if TYPE_CHECKING:
    from forge_rt.clients import ClientKind

__all__ = ["default_report_path", "eval_command"]

_ARGV = "forge_rt.eval.argv"
_LOCAL_MODELS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
_SIM_MODEL = "sim"
SUITES = ("own", "generated", "bfcl")
_GENERATED_CASES = 60


def default_report_path(out: Path) -> Path:
    """Where the HTML report of the results file ``out`` goes unless told: next to it, named
    after it (``runs.jsonl`` -> ``runs.html``), so results files in one folder keep their own."""
    return out.with_suffix(".html")


def _split(values: Sequence[str]) -> list[str]:
    """Repeatable, comma-separated option values as one flat list."""
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


class _EvalGroup(click.Group):
    """A group that keeps its raw arguments, so the sidecar can record the exact command."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGV] = list(args)
        return super().parse_args(ctx, args)


class _Backend(msgspec.Struct, kw_only=True):
    """The resolved backend choice: what to start or connect to, and what labels records get."""

    kind: str  # "sim", "local" or "url"
    label: str
    model: str
    client_kind: str | None = None
    url: str | None = None
    api_key: str | None = None
    n_ctx: int | None = None
    rates: FailureRates | None = None
    sampling: Sampling
    seed: int | None = None

    def settings(self) -> dict[str, Any]:
        """What decides the model's behaviour, as plain JSON-able values (for the sidecar)."""
        return {
            "backend": self.label,
            "backend_kind": self.client_kind,
            "model": self.model,
            "sampling": self.sampling.as_dict(),
            "sim_rates": self.rates.model_dump() if self.rates is not None else None,
            "seed": self.seed,
        }


def _resolve_backend(
    ctx: click.Context,
    *,
    backend: str,
    backend_kind: str,
    backend_api_key: str | None,
    model: str | None,
    n_ctx: int,
    sim_rates: tuple[str, ...],
    card_sampling: bool,
    max_tokens: int | None,
    seed: int | None,
) -> _Backend:
    """Check the backend options against each other and resolve sampling and rates."""
    capped = Sampling(max_tokens=max_tokens)
    if backend == "sim":
        for name in ("card_sampling", "backend_kind", "backend_api_key", "n_ctx"):
            if given(ctx, name, config=False):
                raise click.UsageError(
                    f"--{name.replace('_', '-')} applies to local or URL backends, not sim"
                )
        try:
            rates = parse_sim_rates(sim_rates)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--sim-rates") from None
        return _Backend(
            kind="sim",
            label="sim",
            model=model or _SIM_MODEL,
            rates=rates,
            sampling=capped,
            seed=seed if seed is not None else 0,
        )
    if given(ctx, "sim_rates", config=False):
        raise click.UsageError("--sim-rates applies to --backend sim only")
    from forge_rt.clients import sampling_defaults

    if backend == "local":
        for name in ("backend_kind", "backend_api_key"):
            if given(ctx, name, config=False):
                raise click.UsageError(
                    f"--{name.replace('_', '-')} applies to URL backends; local is llama-server"
                )
        from forge_rt.backends.local import MODELS

        chosen = model or _LOCAL_MODELS[0]
        if chosen not in MODELS:
            raise click.BadParameter(
                f"{chosen!r} is not an embedded model; choose one of {', '.join(MODELS)}",
                param_hint="--model",
            )
        card = sampling_defaults(MODELS[chosen].filename) if card_sampling else Sampling()
        return _Backend(
            kind="local",
            label="local",
            model=chosen,
            client_kind="llamaserver",
            n_ctx=n_ctx,
            sampling=capped.merged_over(card),
            seed=seed,
        )
    if not backend.startswith(("http://", "https://")):
        raise click.BadParameter(
            f"{backend!r} is neither sim, local nor an http(s):// base URL", param_hint="--backend"
        )
    if given(ctx, "n_ctx", config=False):
        raise click.UsageError(
            "--n-ctx sets the embedded model's context (--backend local); a URL backend's is "
            "set where that server starts"
        )
    if backend_kind == "anthropic" and backend_api_key is None:
        raise click.UsageError("an anthropic backend needs its API key: give --backend-api-key")
    if model is None:
        raise click.UsageError(
            "--model is required with a URL backend: it names the served model in requests, "
            "labels the records and picks the card sampling"
        )
    card = Sampling()
    if card_sampling:
        from forge_rt.backends.local import MODELS

        # An embedded model's short name (served elsewhere) finds its card by its file name.
        known = MODELS[model].filename if model in MODELS else model
        try:
            card = sampling_defaults(known)
        except ForgeError as exc:
            raise click.UsageError(f"{exc} (or pass --no-card-sampling)") from None
        beyond = [
            name for name in ("top_k", "min_p", "repeat_penalty") if getattr(card, name) is not None
        ]
        if beyond and backend_kind == "openai":
            # Every run would fail with UnsupportedRequestError: say so once, before any.
            raise click.UsageError(
                f"{model}'s card sampling sets {', '.join(beyond)}, which the plain OpenAI API "
                "cannot send: pass --backend-kind for the server that serves it (llamaserver, "
                "vllm, ollama), or --no-card-sampling"
            )
    return _Backend(
        kind="url",
        label=backend.rstrip("/"),
        model=model,
        client_kind=backend_kind,
        url=backend,
        api_key=backend_api_key,
        sampling=capped.merged_over(card),
        seed=seed,
    )


def _select_scenarios(values: tuple[str, ...]) -> list[Scenario]:
    from forge_rt.eval.scenarios import select

    try:
        return select(_split(values) or None)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--scenarios") from None


def _select_ablations(values: tuple[str, ...]) -> list[Ablation]:
    names = _split(values) or ["full"]
    try:
        return [ablation(name) for name in dict.fromkeys(names)]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--ablation") from None


def _command_line(ctx: click.Context) -> str:
    argv: list[str] = ctx.meta.get(_ARGV, [])
    path = ctx.command_path if ctx.parent is not None else f"forge-rt {ctx.command_path}"
    return " ".join([path, shlex.join(argv)]).strip()


def _quiet_guardrail_logs(ctx: click.Context) -> None:
    """Show only errors in the log unless ``forge-rt --log-level`` was given.

    An eval provokes retries, loop warnings and exhausted budgets by the hundred on purpose --
    they are what it measures, and each run's record counts them -- so at the CLI's default
    level they would bury the progress bar.
    """
    root = ctx.find_root()
    if root is ctx or "log_level" not in root.params:
        return
    if root.get_parameter_source("log_level") is ParameterSource.DEFAULT:
        from forge_rt._logging import configure_logging

        configure_logging(json=bool(root.params.get("log_json")), level="error")


def _stdout_console() -> Console:
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        # A file or a pipe: wide enough that the table keeps one line per row.
        console = Console(highlight=False, soft_wrap=False, width=200)
    return console


def _print_and_write(
    records: list[RunRecord], group_by: Sequence[str], *, source: Path, html: Path
) -> None:
    """Print the tables of ``records`` and write their HTML report to ``html``."""
    try:
        invocations = read_meta(source).invocations
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    sections = build_report(records, group_by)
    console = _stdout_console()
    for section in sections:
        console.print(report_table(section))
    html.parent.mkdir(parents=True, exist_ok=True)
    page = render_html(
        sections, source=source, invocations=invocations, records=records, html_dir=html.parent
    )
    html.write_text(page, encoding="utf-8")
    console.print(f"report: {html}", markup=False)


class _ProgressView:
    """The progress bar of one eval: runs done of all, the run in progress, a running tally."""

    def __init__(self, progress: Progress, total: int) -> None:
        self._progress = progress
        self._task: TaskID = progress.add_task("starting", total=total, tally="")
        self._done = 0
        self._correct = 0
        self._completed = 0

    def started(self, scenario: Scenario, preset: Ablation, run: int) -> None:
        self._progress.update(self._task, description=f"{preset.name} {scenario.name} #{run + 1}")

    def recorded(self, record: RunRecord, index: int, total: int) -> None:
        self._done += 1
        self._completed += record.completed
        self._correct += record.correct
        self._progress.update(
            self._task,
            advance=1,
            tally=f"completed {self._completed} · correct {self._correct}",
        )


def _cache_lines(backend: _Backend, given_lines: int | None, chosen: list[Scenario]) -> int | None:
    """The cache lines of the plan: as given; for the embedded model, one per workflow of the
    largest scenario (it is started with that many slots); none for the sim."""
    if backend.kind == "sim":
        if given_lines is not None:
            raise click.UsageError("--cache-lines applies to local or URL backends, not sim")
        return None
    if given_lines is not None or backend.kind != "local":
        return given_lines
    return lines_for(chosen)


async def _run_plan(
    plan: EvalPlan,
    backend: _Backend,
    on_start: Callable[[Scenario, Ablation, int], None],
    on_record: Callable[[RunRecord, int, int], None],
) -> list[RunRecord]:
    """Start or connect to the backend, then run the plan on it."""
    if backend.kind == "sim":
        assert backend.rates is not None
        factory: Callable[[Scenario, int], AbstractAsyncContextManager[LLMClient]] = (
            functools.partial(sim_client, rates=backend.rates, seed=backend.seed or 0)
        )
        return await run_eval(plan, factory, on_record=on_record, on_start=on_start)
    from forge_rt.clients import LlamaServerClient, make_client

    async with AsyncExitStack() as stack:
        if backend.kind == "local":
            from forge_rt.backends.local import LocalModelServer

            # One backend slot per cache line, each with the whole context a run may use.
            slots = plan.cache_lines or 1
            server = await stack.enter_async_context(
                LocalModelServer.start(
                    backend.model,
                    n_ctx=(backend.n_ctx or DEFAULT_N_CTX) * slots,
                    n_parallel=slots,
                )
            )
            client: LLMClient = await stack.enter_async_context(
                LlamaServerClient(server.url, generation="raw")
            )
        else:
            assert backend.url is not None, "a URL backend has its URL"
            # click.Choice(BACKEND_KINDS) admitted only adapter names.
            kind = cast("ClientKind", backend.client_kind)
            options: dict[str, object] = {"model": backend.model}
            if backend.api_key is not None and kind != "ollama":
                options["api_key"] = backend.api_key
            client = await stack.enter_async_context(make_client(kind, backend.url, **options))

        @asynccontextmanager
        async def shared(scenario: Scenario, run: int) -> AsyncIterator[LLMClient]:
            yield client

        return await run_eval(plan, shared, on_record=on_record, on_start=on_start)


def _run_bfcl_command(
    ctx: click.Context,
    *,
    ablations: tuple[str, ...],
    report_path: Path | None,
    **options: Any,
) -> None:
    """``--suite bfcl``: run, then the tables per category and the HTML report."""
    from forge_rt.eval._bfcl_cli import BfclOptions, run_bfcl_command

    for name in ("sim_rates", "cache_lines", "max_tokens", "seed"):
        if given(ctx, name, config=False):
            raise click.UsageError(
                f"--{name.replace('_', '-')} does not apply to --suite bfcl (BFCL decodes "
                "greedily, one request at a time)"
            )
    _quiet_guardrail_logs(ctx)
    records = run_bfcl_command(
        BfclOptions(ablations=_split(ablations), command=_command_line(ctx), **options)
    )
    out: Path = options["out"]
    _print_and_write(
        records,
        (*DEFAULT_GROUP_BY, "tier"),
        source=out,
        html=report_path or default_report_path(out),
    )


def _check_suite_options(
    ctx: click.Context,
    suite: str,
    *,
    scenarios: tuple[str, ...],
    cases: int | None,
    categories: tuple[str, ...],
    per: int | None,
    route: str | None,
) -> None:
    """Refuse an option of another suite than the one chosen."""
    belongs = {
        "cases": ("generated", cases),
        "categories": ("bfcl", categories),
        "per_category": ("bfcl", per),
        "route": ("bfcl", route),
    }
    for name, (owner, value) in belongs.items():
        if value and owner != suite:
            option = "--" + name.replace("_", "-")
            raise click.UsageError(f"{option} applies to --suite {owner}, not {suite}")
    if suite == "own" and given(ctx, "suite_seed", config=False):
        raise click.UsageError("--suite-seed applies to --suite generated or bfcl, not own")


def _in_split(chosen: list[Scenario], split: SplitName) -> list[Scenario]:
    kept = take_split(chosen, split, lambda s: s.name)
    if chosen and not kept:
        raise click.UsageError(
            f"none of the chosen scenarios is in the {split} split "
            f"({', '.join(f'{s.name}: {split_of(s.name)}' for s in chosen[:8])}); "
            "pass --split all, or choose others"
        )
    return kept


@click.group(
    "eval",
    cls=_EvalGroup,
    invoke_without_command=True,
    context_settings=command_settings("eval"),
    epilog=env_epilog("eval", example="BACKEND"),
)
@config_option("eval")
@backend_option("sim")
@backend_kind_option()
@backend_api_key_option("eval")
@model_option(
    f"local: {' or '.join(_LOCAL_MODELS)} [default: {_LOCAL_MODELS[0]}]; URL: the served "
    f"model (required); sim: a label [default: {_SIM_MODEL}]."
)
@n_ctx_option("local: context tokens of the embedded model's slot.")
@click.option(
    "--suite",
    type=click.Choice(SUITES),
    default="own",
    show_default=True,
    help="own: the 30 hand-written scenarios; generated: seeded random workflows (--cases, "
    "--suite-seed); bfcl: the Berkeley Function Calling Leaderboard's cases and checkers, "
    "through the proxy (--categories, --per-category; needs the bfcl extra).",
)
@click.option(
    "--split",
    type=click.Choice(SPLITS),
    default="all",
    show_default=True,
    help="The half of the suite by a hash of each case id: try rules and compare variants on "
    "dev; run test only to publish a figure.",
)
@click.option(
    "--cases",
    type=click.IntRange(min=1),
    default=None,
    help="generated: how many workflows to generate before the split [default: 60].",
)
@click.option(
    "--categories",
    multiple=True,
    metavar="NAMES",
    help="bfcl: categories, repeatable or comma-separated [default: simple, multiple, "
    "parallel, parallel_multiple, irrelevance].",
)
@click.option(
    "--per-category",
    type=click.IntRange(min=1),
    default=None,
    help="bfcl: cases drawn from each category's half [default: 40].",
)
@click.option(
    "--route",
    type=click.Choice(("proxy", "runtime")),
    default=None,
    help="bfcl: how each case is sent: proxy (an HTTP request to the proxy, as a client sends "
    "it; bare: to the backend) or runtime (a workflow on a Session) [default: proxy].",
)
@click.option(
    "--suite-seed",
    type=int,
    default=None,
    help="generated: the generator's seed; bfcl: the order cases are drawn in [default: 0].",
)
@click.option(
    "--scenarios",
    "-s",
    multiple=True,
    metavar="NAMES",
    help=(
        "own and generated: scenario names or tags (a tier; a generated shape such as "
        "decline); bfcl: case ids among the cases drawn (e.g. to pair an arm only where a "
        "rule fired); repeatable or comma-separated [default: all]."
    ),
)
@click.option(
    "--runs",
    "-n",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Runs of each scenario under each ablation.",
)
@click.option(
    "--ablation",
    "-a",
    "ablations",
    multiple=True,
    metavar="NAMES",
    help=f"Presets to run, repeatable or comma-separated: {', '.join(ABLATIONS)} [default: full].",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("eval_results.jsonl"),
    show_default=True,
    help="JSONL results file; runs already in it are skipped (resume).",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="HTML report written after the run [default: --out with .html for .jsonl].",
)
@click.option(
    "--sim-rates",
    multiple=True,
    metavar="PRESET|DIALECT=P",
    help=f"sim only: a preset ({', '.join(SIM_RATE_PRESETS)}) and/or failure rates such as "
    f"bare_text=0.2 [default: {DEFAULT_SIM_RATES}].",
)
@click.option(
    "--card-sampling/--no-card-sampling",
    default=True,
    show_default=True,
    help="local/URL: sample with the model card's values (Qwen2.5: T 0.7, top_p 0.8, top_k 20).",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="A fixed cap on each reply [default: none: the runtime's own budget, derived from the "
    "tools' schemas, as a user gets it].",
)
@click.option(
    "--cache-lines",
    type=click.IntRange(min=1),
    default=None,
    help="Backend KV slots each run uses as cache lines, so a preempted call returns to its own "
    "warm cache [default: local: one per workflow of the largest chosen scenario; URL: none "
    "(give your server's --parallel)]. Not for sim.",
)
@seed_option(
    None,
    "Seed: of the sim's random model [default: 0]; for local/URL, run r samples with a "
    "seed derived from it [default: unseeded].",
)
@click.pass_context
def eval_command(
    ctx: click.Context,
    backend: str,
    backend_kind: str,
    backend_api_key: str | None,
    model: str | None,
    n_ctx: int,
    scenarios: tuple[str, ...],
    runs: int,
    ablations: tuple[str, ...],
    out: Path,
    report_path: Path | None,
    sim_rates: tuple[str, ...],
    card_sampling: bool,
    max_tokens: int | None,
    cache_lines: int | None,
    seed: int | None,
    suite: str,
    split: str,
    cases: int | None,
    categories: tuple[str, ...],
    per_category: int | None,
    suite_seed: int | None,
    route: str | None,
) -> None:
    """Run eval scenarios under guardrail ablations and report completion and score.

    Every run appends a record to --out; the same command run again skips what is done. After
    the run a table is printed and an HTML report written. Exit status: 0 done, 1 the backend
    failed (the runs so far are kept), 2 bad usage. Unless `forge-rt --log-level` is given,
    only errors are logged: the retries an eval provokes are counted in its records.
    """
    if ctx.invoked_subcommand is not None:
        stray = [
            max(p.opts, key=len)
            for p in ctx.command.params
            if p.name is not None and given(ctx, p.name)
        ]
        if stray:
            raise click.UsageError(
                f"{', '.join(stray)}: options of an eval run, not of "
                f"`{ctx.invoked_subcommand}`; give `{ctx.invoked_subcommand}` its own options "
                "after its name"
            )
        return
    _check_suite_options(
        ctx,
        suite,
        scenarios=scenarios,
        cases=cases,
        categories=categories,
        per=per_category,
        route=route,
    )
    if suite == "bfcl":
        _run_bfcl_command(
            ctx,
            backend=backend,
            backend_kind=backend_kind,
            backend_api_key=backend_api_key,
            model=model,
            n_ctx=n_ctx,
            runs=runs,
            ablations=ablations,
            out=out,
            report_path=report_path,
            split=cast("SplitName", split),
            categories=_split(categories),
            per_category=per_category,
            seed=suite_seed or 0,
            route=route or "proxy",
            case_ids=_split(scenarios),
        )
        return
    if suite == "generated":
        from forge_rt.eval.generated import generate_suite

        chosen = generate_suite(seed=suite_seed or 0, count=cases or _GENERATED_CASES)
        try:
            chosen = select_from(chosen, _split(scenarios))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--scenarios") from None
    else:
        chosen = _select_scenarios(scenarios)
    chosen = _in_split(chosen, cast("SplitName", split))
    presets = _select_ablations(ablations)
    resolved = _resolve_backend(
        ctx,
        backend=backend,
        backend_kind=backend_kind,
        backend_api_key=backend_api_key,
        model=model,
        n_ctx=n_ctx,
        sim_rates=sim_rates,
        card_sampling=card_sampling,
        max_tokens=max_tokens,
        seed=seed,
    )
    settings = resolved.settings()
    try:
        meta = read_meta(out)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    clash = meta.conflicting(settings)
    if clash is not None:
        different = sorted(k for k in settings if settings[k] != clash.settings.get(k))
        raise click.UsageError(
            f"{out} already holds {resolved.label}/{resolved.model} runs made with other "
            f"settings ({', '.join(different)} differ, by `{clash.command}`); resuming would "
            "mix them: pass another --out, or --model to label this configuration apart"
        )
    plan = EvalPlan(
        backend=resolved.label,
        model=resolved.model,
        suite=suite,
        scenarios=chosen,
        ablations=presets,
        runs=runs,
        out=out,
        sampling=resolved.sampling,
        seed=resolved.seed if resolved.kind != "sim" else None,
        cache_lines=_cache_lines(resolved, cache_lines, chosen),
    )
    _quiet_guardrail_logs(ctx)
    errors = Console(stderr=True, highlight=False, soft_wrap=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    todo = len(pending_runs(plan))
    planned = len(chosen) * len(presets) * runs
    errors.print(
        f"eval: {len(chosen)} scenarios x {len(presets)} ablations x {runs} runs on "
        f"{resolved.label} ({resolved.model}): {todo} to run, {planned - todo} already in {out}",
        markup=False,
    )
    if not meta.invocations and out.exists() and planned > todo:
        errors.print(
            f"note: {meta_path(out)} is missing, so the settings of the runs already in {out} "
            "cannot be checked against these",
            markup=False,
        )
    invocation = Invocation(
        command=_command_line(ctx),
        started=utc_now(),
        settings=settings,
        scenarios=[s.name for s in chosen],
        ablations=[a.name for a in presets],
        runs=runs,
        version=__version__,
        commit=source_commit(),
    )
    new: list[RunRecord] = []
    with (
        recording(out, meta, invocation, new) as outcome,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[tally]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=errors,
            disable=not errors.is_terminal,
        ) as progress,
    ):
        view = _ProgressView(progress, todo)

        def recorded(record: RunRecord, index: int, total: int) -> None:
            new.append(record)
            view.recorded(record, index, total)

        trio.run(_run_plan, plan, resolved, view.started, recorded)
    failure = outcome.failure
    errors.print(
        f"ran {len(new)} runs: {sum(r.completed for r in new)} completed, "
        f"{sum(r.correct for r in new)} correct",
        markup=False,
    )
    if failure is not None:
        body = getattr(failure, "body", None)
        said = f"the backend said: {body[:500]}\n" if body else ""
        raise click.ClickException(
            f"the backend failed: {type(failure).__name__}: {failure}\n{said}"
            f"{len(new)} runs of this invocation are saved in {out}; run the same command "
            "again to resume"
        ) from failure
    _print_and_write(
        list(read_records(out)),
        DEFAULT_GROUP_BY,
        source=out,
        html=report_path or default_report_path(out),
    )


@eval_command.command(
    "report",
    context_settings=command_settings("eval", "report"),
    epilog=env_epilog("eval", "report", example="GROUP_BY", config=False),
)
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the HTML report [default: PATH with .html for .jsonl].",
)
@click.option(
    "--group-by",
    default=",".join(DEFAULT_GROUP_BY),
    show_default=True,
    help=f"Fields that split the results, from {', '.join(GROUP_FIELDS)}; ablation makes the "
    "rows, the others the tables.",
)
def report_command(path: Path, html_path: Path | None, group_by: str) -> None:
    """Print the table of an eval's results file and write its HTML report."""
    fields = _split((group_by,))
    unknown = [f for f in fields if f not in GROUP_FIELDS]
    if unknown or not fields:
        raise click.BadParameter(
            f"{group_by!r}: group by one or more of {', '.join(GROUP_FIELDS)}",
            param_hint="--group-by",
        )
    try:
        records = list(read_records(path))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if not records:
        raise click.ClickException(f"{path} holds no run records; run `forge-rt eval` first")
    _print_and_write(records, fields, source=path, html=html_path or default_report_path(path))


@eval_command.command(
    "rules",
    context_settings=command_settings("eval", "rules"),
    epilog=env_epilog("eval", "rules", example="BASELINE", config=False),
)
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--baseline",
    default="full",
    show_default=True,
    help="The arm each rule is audited in, and each without:RULE arm is paired with.",
)
@click.option(
    "--fired",
    "fired_rule",
    default=None,
    metavar="RULE",
    help="Print only the ids of the cases RULE fired in, comma-separated (for --scenarios).",
)
def rules_command(path: Path, baseline: str, fired_rule: str | None) -> None:
    """Print the per-rule audit of an eval's results file: for each guardrail rule, the runs it
    fired in and how many of them ended correct, and, where the file holds the arm
    without:RULE, the runs the rule turned right and wrong, with McNemar's p."""
    if fired_rule is not None:
        try:
            cases = fired_in(read_records(path), fired_rule, baseline=baseline)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--fired") from None
        click.echo(",".join(cases))
        return
    try:
        lines = rule_audit(read_records(path), baseline=baseline)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    table = Table(title=f"{path} · rules in the {baseline} arm")
    for name in (
        "rule",
        "stage",
        "fired in",
        "correct when fired",
        "turned right",
        "turned wrong",
        "p",
    ):
        table.add_column(name, justify="left" if name in ("rule", "stage") else "right")
    for line in lines:
        paired = (str(line.gained), str(line.lost), format_p(line.p)) if line.paired else ("-",) * 3
        table.add_row(
            line.rule,
            line.stage,
            f"{line.fired}/{line.runs}" if line.counted else "-",
            f"{line.correct_when_fired}/{line.fired}" if line.fired else "-",
            *paired,
        )
    Console(width=120).print(table)

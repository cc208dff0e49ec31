"""BFCL cases on the embedded 0.5B, both routes: the records say what the model did and what
BFCL's checker made of it. Asserts forge_rt's behaviour, never that the model is right."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from forge_rt.clients import LlamaServerClient
from forge_rt.eval import read_records
from forge_rt.eval.bfcl import BfclPlan, run_bfcl, sample_cases
from forge_rt.proxy import BackendConfig

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("route", ["proxy", "runtime"])
async def test_real_model_cases_get_bfcls_verdict_by_either_route(
    local_model_url: str, tmp_path: Path, route: str
) -> None:
    cases = sample_cases(["simple", "irrelevance"], 1, split="dev", seed=9)
    out = tmp_path / f"{route}.jsonl"
    ablations = ["full", "bare"] if route == "proxy" else ["full"]
    plan = BfclPlan(
        backend="local", model="qwen2.5-coder-0.5b", cases=cases, ablations=ablations, runs=1,
        out=out, route=route,  # type: ignore[arg-type]
    )  # fmt: skip
    backend = BackendConfig(url=local_model_url, kind="llamaserver")
    with trio.fail_after(300):
        async with LlamaServerClient(local_model_url, generation="raw") as client:
            new = await run_bfcl(plan, backend, client=client if route == "runtime" else None)
    records = list(read_records(out))
    assert len(new) == len(records) == len(cases) * len(ablations)
    for record in records:
        assert record.checker["valid"] is record.correct
        assert record.correct or record.checker["error_type"]
        assert record.completed or record.error_type
        # What the model did is on the record: the calls it made or the answer it gave.
        assert record.calls or record.output or record.error_type

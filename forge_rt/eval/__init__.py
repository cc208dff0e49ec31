"""The eval: scenarios, ablation presets, a resumable runner, metrics and reports."""

from forge_rt.eval._ablation import ABLATIONS as ABLATIONS
from forge_rt.eval._ablation import Ablation as Ablation
from forge_rt.eval._ablation import ablation as ablation
from forge_rt.eval._metrics import Summary as Summary
from forge_rt.eval._metrics import mcnemar_p as mcnemar_p
from forge_rt.eval._metrics import paired_mcnemar as paired_mcnemar
from forge_rt.eval._metrics import pass_hat_k as pass_hat_k
from forge_rt.eval._metrics import summarise as summarise
from forge_rt.eval._metrics import wilson as wilson
from forge_rt.eval._record import RunRecord as RunRecord
from forge_rt.eval._record import append_record as append_record
from forge_rt.eval._record import read_records as read_records
from forge_rt.eval._runner import EvalPlan as EvalPlan
from forge_rt.eval._runner import run_eval as run_eval
from forge_rt.eval._runner import run_scenario as run_scenario
from forge_rt.eval._runner import run_trace_path as run_trace_path
from forge_rt.eval._runner import sim_client as sim_client
from forge_rt.eval._scenario import Contender as Contender
from forge_rt.eval._scenario import Scenario as Scenario
from forge_rt.eval._scenario import ScenarioRun as ScenarioRun
from forge_rt.eval._scenario import Verdict as Verdict

__all__ = [
    "ABLATIONS",
    "Ablation",
    "Contender",
    "EvalPlan",
    "RunRecord",
    "Scenario",
    "ScenarioRun",
    "Summary",
    "Verdict",
    "ablation",
    "append_record",
    "mcnemar_p",
    "paired_mcnemar",
    "pass_hat_k",
    "read_records",
    "run_eval",
    "run_scenario",
    "run_trace_path",
    "sim_client",
    "summarise",
    "wilson",
]

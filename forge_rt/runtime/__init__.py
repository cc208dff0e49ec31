"""The actor runtime: SlotWorker (shared inference slots), BudgetActor, WorkflowActor, runners."""

from forge_rt.runtime._approvals import ApprovalCallback as ApprovalCallback
from forge_rt.runtime._approvals import ApprovalGate as ApprovalGate
from forge_rt.runtime._approvals import ApprovalRequest as ApprovalRequest
from forge_rt.runtime._budget import Available as Available
from forge_rt.runtime._budget import BudgetActor as BudgetActor
from forge_rt.runtime._budget import BudgetBoard as BudgetBoard
from forge_rt.runtime._budget import BudgetMonitor as BudgetMonitor
from forge_rt.runtime._budget import BudgetReport as BudgetReport
from forge_rt.runtime._budget import BudgetSource as BudgetSource
from forge_rt.runtime._budget import ClientContextSource as ClientContextSource
from forge_rt.runtime._budget import GetBudget as GetBudget
from forge_rt.runtime._budget import LlamaServerSource as LlamaServerSource
from forge_rt.runtime._budget import NvmlSource as NvmlSource
from forge_rt.runtime._budget import ObservedUsage as ObservedUsage
from forge_rt.runtime._budget import Unavailable as Unavailable
from forge_rt.runtime._budget import VLLMMetricsSource as VLLMMetricsSource
from forge_rt.runtime._fleet import Fleet as Fleet
from forge_rt.runtime._fleet import LaneReport as LaneReport
from forge_rt.runtime._fleet import slot_report as slot_report
from forge_rt.runtime._leases import SessionLease as SessionLease
from forge_rt.runtime._pool import SlotPool as SlotPool
from forge_rt.runtime._runner import Session as Session
from forge_rt.runtime._runner import WorkflowHandle as WorkflowHandle
from forge_rt.runtime._runner import WorkflowRunner as WorkflowRunner
from forge_rt.runtime._scheduling import DEFAULT_MAX_WAIT_S as DEFAULT_MAX_WAIT_S
from forge_rt.runtime._scheduling import InferenceJob as InferenceJob
from forge_rt.runtime._scheduling import PreemptPolicy as PreemptPolicy
from forge_rt.runtime._slot import InferenceSlot as InferenceSlot
from forge_rt.runtime._slot import SlotWorker as SlotWorker
from forge_rt.runtime._slot_limits import BackendRetry as BackendRetry
from forge_rt.runtime._slot_limits import StallLimits as StallLimits
from forge_rt.runtime._slot_messages import Recheck as Recheck
from forge_rt.runtime._slot_stats import PriorityWaits as PriorityWaits
from forge_rt.runtime._slot_stats import SlotStats as SlotStats
from forge_rt.runtime._step import Accepted as Accepted
from forge_rt.runtime._step import GuardedStep as GuardedStep
from forge_rt.runtime._step import Rejected as Rejected
from forge_rt.runtime._step import RunStats as RunStats
from forge_rt.runtime._step import SlotCall as SlotCall
from forge_rt.runtime._workflow_actor import TurnOptions as TurnOptions
from forge_rt.runtime._workflow_actor import WorkflowActor as WorkflowActor
from forge_rt.runtime._workflow_actor import WorkflowResult as WorkflowResult

__all__ = [
    "DEFAULT_MAX_WAIT_S",
    "Accepted",
    "ApprovalCallback",
    "ApprovalGate",
    "ApprovalRequest",
    "Available",
    "BackendRetry",
    "BudgetActor",
    "BudgetBoard",
    "BudgetMonitor",
    "BudgetReport",
    "BudgetSource",
    "ClientContextSource",
    "Fleet",
    "GetBudget",
    "GuardedStep",
    "InferenceJob",
    "InferenceSlot",
    "LaneReport",
    "LlamaServerSource",
    "NvmlSource",
    "ObservedUsage",
    "PreemptPolicy",
    "PriorityWaits",
    "Recheck",
    "Rejected",
    "RunStats",
    "Session",
    "SessionLease",
    "SlotCall",
    "SlotPool",
    "SlotStats",
    "SlotWorker",
    "StallLimits",
    "TurnOptions",
    "Unavailable",
    "VLLMMetricsSource",
    "WorkflowActor",
    "WorkflowHandle",
    "WorkflowResult",
    "WorkflowRunner",
    "slot_report",
]

"""The actor runtime: SlotWorker (shared inference slots), BudgetActor, WorkflowActor, runners."""

from forge_rt.runtime._scheduling import InferenceJob as InferenceJob
from forge_rt.runtime._scheduling import PreemptPolicy as PreemptPolicy
from forge_rt.runtime._slot import PriorityWaits as PriorityWaits
from forge_rt.runtime._slot import Recheck as Recheck
from forge_rt.runtime._slot import SlotStats as SlotStats
from forge_rt.runtime._slot import SlotWorker as SlotWorker

__all__ = [
    "InferenceJob",
    "PreemptPolicy",
    "PriorityWaits",
    "Recheck",
    "SlotStats",
    "SlotWorker",
]

"""The ``forge-rt demo``: three specialist agents and a voice request sharing one inference slot.

The researcher, analyst and writer run real multi-step workflows (deterministic tools) at
background priority on one :class:`~forge_rt.runtime.Session`; partway through, a voice request
arrives at high priority and preempts them. From Python::

    import trio
    from forge_rt.demo import DemoConfig, run_demo

    report = trio.run(run_demo, DemoConfig(backend="sim"))
    print("\\n".join(report.summary_lines()))

``backend`` is ``"local"`` (the embedded Qwen2.5-Coder through llama.cpp, the default),
``"sim"`` (the simulated backend at the 0.5B model's speed) or a model server's base URL.
"""

from forge_rt.demo._agents import AGENTS as AGENTS
from forge_rt.demo._agents import AgentSpec as AgentSpec
from forge_rt.demo._agents import PlannedCall as PlannedCall
from forge_rt.demo._config import DemoConfig as DemoConfig
from forge_rt.demo._config import load_config as load_config
from forge_rt.demo._monitor import AgentState as AgentState
from forge_rt.demo._monitor import AgentView as AgentView
from forge_rt.demo._monitor import DemoEvent as DemoEvent
from forge_rt.demo._monitor import DemoMonitor as DemoMonitor
from forge_rt.demo._report import AgentOutcome as AgentOutcome
from forge_rt.demo._report import DemoReport as DemoReport
from forge_rt.demo._run import open_backend as open_backend
from forge_rt.demo._run import run_demo as run_demo
from forge_rt.demo._sim import demo_sim_config as demo_sim_config

__all__ = [
    "AGENTS",
    "AgentOutcome",
    "AgentSpec",
    "AgentState",
    "AgentView",
    "DemoConfig",
    "DemoEvent",
    "DemoMonitor",
    "DemoReport",
    "PlannedCall",
    "demo_sim_config",
    "load_config",
    "open_backend",
    "run_demo",
]

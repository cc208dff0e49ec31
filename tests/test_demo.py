"""The demo: agents and their tools, the monitor, a whole run on the simulated backend, the command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing
from rich.console import Console
from structlog.testing import capture_logs

from forge_rt.backends.sim import (
    RequestView,
    SimBackend,
    SimConfig,
    SimToolCall,
    ViewMessage,
    ViewToolCall,
)
from forge_rt.core import FinalChunk, LLMResponse, Message, TextDeltaChunk, TextResponse, ToolCall
from forge_rt.demo import AGENTS, DemoConfig, DemoMonitor, load_config, run_demo
from forge_rt.demo._sim import plan_oracle
from forge_rt.demo._view import render
from forge_rt.errors import BackendError, ToolResolutionError
from forge_rt.runtime import SlotStats

FORGE_RT = Path(sys.executable).with_name("forge-rt")  # the installed console script

# A preemption that lands while httpx is still writing a request body leaves httpx's one-shot
# body generator unfinished; trio warns when it is garbage-collected. The fault is in the client
# layer (forge_rt/clients/_http.py sends bytes bodies as httpx.ByteStream, an async generator);
# until it sends a body that is not an async generator, only that exact warning is tolerated.
# Free decoding, so the sim writes calls in its text dialects and the rescues show.
FAST = {"backend": "sim", "sim_speed": 20.0, "tool_seconds": 0.05, "constrain": "never"}


def _agent(name: str):  # type: ignore[no-untyped-def]
    return next(a for a in AGENTS if a.name == name)


# --- agents and tools ----------------------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a.name)
def test_every_plan_step_succeeds_with_its_own_tools(agent) -> None:  # type: ignore[no-untyped-def]
    """A perfect model following an agent's plan gets a result (no tool error) from every step."""
    results = agent.expected_results()
    assert len(results) == len([c for c in agent.plan if c.tool != "respond"])
    assert all(r and not r.startswith("[") for r in results)


@pytest.mark.parametrize(
    ("agent", "tool", "args", "fix"),
    [
        ("analyst", "get_sales", {"region": "west"}, "the regions are north, south"),
        ("researcher", "search_library", {"query": "  "}, "query is empty"),
        ("writer", "publish_tagline", {"text": "x" * 201}, "the limit is 200"),
        ("voice", "get_weather", {"city": "Atlantis"}, "the cities are oslo, paris, rome"),
    ],
    ids=["unknown-region", "empty-query", "long-tagline", "unknown-city"],
)
def test_a_tool_called_wrong_says_how_to_fix_it(
    agent: str, tool: str, args: dict[str, object], fix: str
) -> None:
    """Bad arguments raise ToolResolutionError whose message names the valid choice or limit."""
    spec = _agent(agent)
    fn = next(t.fn for t in spec.tools if t.name == tool)
    with pytest.raises(ToolResolutionError, match=re.escape(fix)):
        fn(**args)


def test_background_specialists_file_results_and_voice_answers_the_user() -> None:
    """Specialists end on their own terminal tool without respond; the voice ends on respond."""
    for spec in AGENTS:
        workflow = spec.workflow()
        if spec.background:
            assert workflow.terminal_tools == {spec.terminal}
            assert not workflow.respond_tool
        else:
            assert workflow.terminal_tools == {"respond"}
        assert workflow.required_steps == tuple(
            t.name for t in spec.tools if t.name != spec.terminal
        )


async def test_tool_hook_and_io_time(autojump_clock: trio.testing.MockClock) -> None:
    """A demo tool reports its start to the hook, then takes tool_seconds before returning."""
    seen: list[tuple[str, str]] = []
    workflow = _agent("voice").workflow(
        tool_seconds=2.0, on_tool=lambda agent, tool: seen.append((agent, tool))
    )
    start = trio.current_time()
    out = await workflow.tools["get_weather"].callable(city="Rome")
    assert (out, seen, trio.current_time() - start) == (
        "Rome: 24 C and sunny",
        [("voice", "get_weather")],
        2.0,
    )


# --- the simulated model's oracle ----------------------------------------------------------------


def test_sim_oracle_follows_the_plan_step_by_step() -> None:
    """The plan oracle makes the next call whose result is not in the history yet."""
    voice = _agent("voice")
    oracle = plan_oracle()
    user = ViewMessage(role="user", content=voice.task)
    call = ViewToolCall(id="c1", name="get_weather", arguments="{}")
    failed = ViewMessage(role="tool", tool_call_id="c1", content="[ToolResolutionError] no city")
    done = ViewMessage(role="tool", tool_call_id="c1", content=voice.expected_results()[0])
    asked = ViewMessage(role="assistant", tool_calls=(call,))

    def view(*messages: ViewMessage) -> RequestView:
        return RequestView(api="openai", conversation=voice.task, turn=0, messages=messages)

    assert oracle(view(user)) == SimToolCall(name="get_weather", arguments={"city": "Rome"})
    assert oracle(view(user, asked, failed)).name == "get_weather"  # tried again
    assert oracle(view(user, asked, done)).name == "respond"


def test_sim_oracle_refuses_a_conversation_it_has_no_plan_for() -> None:
    """An unknown task is a LookupError naming the tasks it knows, not an invented reply."""
    unknown = RequestView(
        api="openai",
        conversation="hello",
        turn=0,
        messages=(ViewMessage(role="user", content="hello"),),
    )
    with pytest.raises(LookupError, match="no plan for the conversation 'hello'"):
        plan_oracle()(unknown)


# --- the monitor ---------------------------------------------------------------------------------


def _monitor() -> DemoMonitor:
    monitor = DemoMonitor()
    for spec in AGENTS:
        priority = 10 if spec.background else 0
        monitor.register(
            spec.name, spec.role, spec.workflow(), priority, background=spec.background
        )
    return monitor


def _final(text: str) -> FinalChunk:
    return FinalChunk(LLMResponse(result=TextResponse(content=text)))


async def test_monitor_counts_a_rescue_only_when_the_call_runs() -> None:
    """A text reply whose call is executed counts its dialect; a rejected batch counts nothing."""
    monitor = _monitor()
    call = ToolCall(tool="get_weather", args={"city": "Rome"})
    monitor.begin("voice")
    monitor.on_chunk(
        "voice", _final('```json\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n```')
    )
    monitor.on_message("voice", Message.assistant_calls([call], content="", transient=True))
    assert monitor.agents["voice"].rescues == {}
    monitor.on_chunk("voice", _final('{"name": "get_weather", "arguments": {"city": "Rome"}}'))
    monitor.on_message("voice", Message.assistant_calls([call], content=""))
    assert dict(monitor.agents["voice"].rescues) == {"bare_json": 1}
    assert [e.text for e in monitor.events if e.kind == "rescued"] == [
        "rescued call(s) written as bare_json"
    ]


async def test_monitor_calls_a_cut_off_attempt_a_preemption_only_under_a_more_urgent_agent() -> (
    None
):
    """An attempt cancelled while the voice is active is a preemption; otherwise it is not."""
    monitor = _monitor()
    monitor.begin("writer")
    monitor.on_attempt("writer")
    monitor.on_chunk("writer", TextDeltaChunk("{"))
    monitor.on_attempt_cancelled("writer")  # nobody more urgent: its own deadline, say
    assert monitor.agents["writer"].preempted == 0
    monitor.begin("voice")
    monitor.on_attempt("writer")
    monitor.on_chunk("writer", TextDeltaChunk("{"))
    monitor.on_attempt_cancelled("writer")
    writer = monitor.agents["writer"]
    assert (writer.preempted, writer.label()) == (1, "queued (preempted)")
    assert monitor.events[-1].text == (
        "preempted by voice after 1 generated tokens; its call is re-queued"
    )


async def test_voice_trigger_waits_for_a_background_agent_mid_generation() -> None:
    """The trigger needs one finished background inference, then one agent streaming tokens."""
    monitor = _monitor()
    monitor.begin("writer")
    for _ in range(5):
        monitor.on_chunk("writer", TextDeltaChunk("x"))
    assert not monitor.voice_trigger.is_set()  # nothing has finished yet: still warming up
    monitor.on_chunk("writer", _final("x"))
    monitor.on_message("writer", Message.user("try again"))
    monitor.on_chunk("writer", TextDeltaChunk("a"))
    monitor.on_chunk("writer", TextDeltaChunk("b"))
    assert not monitor.voice_trigger.is_set()
    monitor.on_chunk("writer", TextDeltaChunk("c"))
    assert monitor.voice_trigger.is_set()


async def test_voice_trigger_fires_when_every_background_agent_has_ended() -> None:
    """With no background agent left to catch mid-generation, the voice is not kept waiting."""
    monitor = _monitor()
    for name in ("researcher", "analyst"):
        monitor.begin(name)
        monitor.finish(name, "ok")
    assert not monitor.voice_trigger.is_set()
    monitor.begin("writer")
    monitor.fail("writer", ToolResolutionError("x"))
    assert monitor.voice_trigger.is_set()


async def test_time_to_first_token_counts_from_the_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Each inference's TTFT runs from the message that requested it to its first token."""
    monitor = _monitor()
    monitor.begin("analyst")
    await trio.sleep(3.0)
    monitor.on_chunk("analyst", TextDeltaChunk("{"))
    await trio.sleep(1.0)
    monitor.on_chunk("analyst", _final("{}"))
    monitor.on_message("analyst", Message.user("again"))
    await trio.sleep(0.5)
    monitor.on_chunk("analyst", TextDeltaChunk("{"))
    monitor.on_chunk("analyst", TextDeltaChunk("}"))
    assert monitor.agents["analyst"].ttfts == [3.0, 0.5]


async def test_the_live_view_shows_the_requests_first_token_time_as_the_summary_does(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """One definition per figure: the view's "first token" is the request's first inference,
    timed from the request's arrival, and does not change when later inferences come."""
    monitor = _monitor()
    monitor.begin("voice")
    await trio.sleep(1.25)
    monitor.on_chunk("voice", TextDeltaChunk("{"))
    monitor.on_chunk("voice", _final("{}"))
    monitor.on_message("voice", Message.user("again"))
    await trio.sleep(0.5)
    monitor.on_chunk("voice", TextDeltaChunk("{"))
    console = Console(record=True, width=130, color_system=None)
    console.print(render(monitor, "forge-rt demo"))
    row = next(line for line in console.export_text().splitlines() if "voice" in line)
    assert "1.25 s" in row
    assert "0.50 s" not in row


async def test_the_slot_bar_says_what_the_agents_rows_say() -> None:
    """An agent still reading its prompt makes the bar say "reading prompt", not "generating"."""
    monitor = _monitor()
    monitor.begin("voice")
    monitor.on_attempt("voice")
    console = Console(record=True, width=130, color_system=None)
    console.print(render(monitor, "forge-rt demo"))
    text = console.export_text()
    assert "reading prompt" in text
    assert "slot generating" not in text


# --- config --------------------------------------------------------------------------------------


def test_config_file_is_read_and_overrides_win(tmp_path: Path) -> None:
    """TOML keys set fields; overrides (flags) beat the file; unknown keys are refused."""
    path = tmp_path / "demo.toml"
    path.write_text('backend = "sim"\nvoice_at = 2.5\nseed = 3\n')
    config = load_config(path, {"seed": 7})
    assert (config.backend, config.voice_at, config.seed) == ("sim", 2.5, 7)
    path.write_text("voice_att = 1\n")
    with pytest.raises(ValueError, match="voice_att"):
        load_config(path)


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        ("ftp://x", "is not 'local', 'sim' or an http(s):// URL"),
        ("http://h:1/v1", "ends in /v1: give the server's base URL without it, e.g. 'http://h:1'"),
    ],
    ids=["not-a-url", "v1-suffix"],
)
def test_a_bad_backend_is_refused_with_the_fix(backend: str, message: str) -> None:
    """A backend that is neither local, sim nor a base URL fails validation, saying why."""
    with pytest.raises(ValueError, match=re.escape(message)):
        DemoConfig(backend=backend)


def test_several_servers_are_started_not_named() -> None:
    """A URL is one server someone runs: the demo starts several of local or sim only."""
    with pytest.raises(ValueError, match="a URL names one server you run"):
        DemoConfig(backend="http://127.0.0.1:9", servers=2)


# --- a whole run ---------------------------------------------------------------------------------


async def test_sim_demo_runs_all_four_agents_and_measures_the_voice_ahead(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """On the sim all four agents finish, the voice preempts, and its TTFT beats the background's.

    The sim models time on trio's clock, so under the autojump clock every figure is virtual
    time: the comparison is the same however busy the machine is.
    """
    events = []
    with trio.fail_after(60), capture_logs() as logs:
        report = await run_demo(DemoConfig(**FAST), on_event=events.append)
    assert report.completions == 4
    assert report.contended
    assert report.preemptions >= 1
    assert report.preemptions == sum(a.preempted for a in report.agents)
    assert report.voice_ttft_s is not None
    assert report.background_ttft_median_s is not None
    assert report.voice_ttft_s < report.background_ttft_median_s
    # Every inference is an agent's, but the prewarm and the idle-slot baseline's.
    assert report.slot_calls == sum(a.inferences for a in report.agents) + report.baseline_calls
    assert report.voice_idle_ttft_s is not None
    assert report.continued + report.restarted == report.preemptions
    # The live rescue counts agree with the runtime's own per-run statistics.
    runtime = {e["agent"]: e["rescued"] for e in logs if e["event"] == "demo.agent_done"}
    assert runtime == {a.name: a.rescues for a in report.agents}
    assert sum(report.rescues.values()) > 0
    kinds = {e.kind for e in events}
    assert {"start", "arrive", "preempted", "rescued", "done"} <= kinds


async def test_the_demo_runs_on_a_fleet_of_two_servers_and_shows_each_lane(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """--servers 2: the agents spread over two simulated servers; the view has a line a lane."""
    ticks: list[str] = []

    def on_tick(monitor: DemoMonitor) -> None:
        console = Console(record=True, width=130, color_system=None)
        console.print(render(monitor, "forge-rt demo"))
        ticks.append(console.export_text())

    with trio.fail_after(60):
        report = await run_demo(DemoConfig(**FAST, servers=2), on_tick=on_tick)
    assert report.completions == 4
    assert "2 servers as one fleet" in report.backend
    assert report.backend.count("http://127.0.0.1:") == 2
    final = ticks[-1]
    done = [int(m) for m in re.findall(r"lane[01] \w+ · \d+ in flight · (\d+) done", final)]
    assert len(done) == 2, final
    assert min(done) > 0, final  # both servers served calls
    assert sum(done) == report.slot_calls


async def test_voice_at_a_fixed_time_arrives_then(autojump_clock: trio.testing.MockClock) -> None:
    """With voice_at the voice request arrives that many seconds after the agents start."""
    report = await run_demo(DemoConfig(**FAST, voice_at=0.3))
    assert report.voice_arrived_s == pytest.approx(0.3)
    assert report.voice.ok


async def test_a_backend_that_fails_ends_the_demo_with_the_typed_error() -> None:
    """A server that refuses connections raises BackendError out of run_demo (not a report)."""
    async with SimBackend.serve(SimConfig()) as sim:
        url = sim.url
    with trio.fail_after(60), pytest.raises(BackendError, match="could not connect"):
        await run_demo(DemoConfig(backend=url, tool_seconds=0.0))


# --- the command ---------------------------------------------------------------------------------


async def _forge_rt(*args: str, limit: float) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "120"}
    with trio.fail_after(limit):
        return await trio.run_process(
            [str(FORGE_RT), *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=env,
        )


async def test_demo_command_on_the_sim_prints_progress_and_the_summary() -> None:
    """`forge-rt demo --backend sim` (not a TTY) prints event lines, then the summary; exit 0."""
    proc = await _forge_rt(
        "demo",
        "--backend",
        "sim",
        "--sim-speed",
        "20",
        "--tool-seconds",
        "0.05",
        "--constrain",
        "never",
        limit=90,
    )
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert re.search(r"^ +[\d.]+s  voice +arrived at priority 0$", out, re.MULTILINE), out
    summary = out[out.index("\nsummary\n") :]
    assert "  completions    4 of 4 (researcher done, analyst done, writer done, voice done)\n" in (
        summary
    )
    ttft = re.search(
        r"  voice TTFT     ([\d.]+) s from arrival to first token; ([\d.]+) s on the idle "
        r"slot in the same run \(([\d.]+)x\)",
        summary,
    )
    assert ttft is not None, summary  # which is smaller is pinned on the autojump clock above
    # How many real time gives depends on the machine; the autojump test above pins >= 1.
    assert re.search(
        r"^  preemptions    (0|\d+ \(\d+ continued, \d+ restarted\); \d+ tokens decoded again, "
        r"\d+ of \d+ prompt tokens prefilled again on resume)$",
        summary,
        re.MULTILINE,
    ), summary
    assert re.search(r"^  rescues        \d+: \w+ \d+", summary, re.MULTILINE), summary
    wall = re.search(
        r"^  wall time      ([\d.]+) s, from ([\d.]+) s to ([\d.]+) s on the event clock$",
        summary,
        re.MULTILINE,
    )
    assert wall is not None, summary
    assert abs(float(wall[2]) + float(wall[1]) - float(wall[3])) <= 0.11


async def test_demo_command_exits_1_with_the_typed_error_when_the_backend_is_down() -> None:
    """A backend that cannot be reached is a runtime failure: exit 1 naming BackendError."""
    async with SimBackend.serve(SimConfig()) as sim:
        url = sim.url
    proc = await _forge_rt("demo", "--backend", url, limit=60)
    assert proc.returncode == 1
    assert "Error: BackendError: POST " in proc.stderr.decode()


@pytest.mark.slow
async def test_demo_command_on_the_embedded_model() -> None:
    """`forge-rt demo` on the embedded 0.5B model runs all four agents and prints the summary."""
    proc = await _forge_rt("demo", limit=1500)
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    summary = out[out.index("\nsummary\n") :]
    assert (
        "  backend        embedded qwen2.5-coder-0.5b (llama.cpp) at http://127.0.0.1:" in summary
    )
    assert re.search(r"^  completions    [0-4] of 4 \(researcher ", summary, re.MULTILINE)
    assert re.search(
        r"^  voice TTFT     [\d.]+ s from arrival to first token; [\d.]+ s on the idle slot",
        summary,
        re.MULTILINE,
    )
    assert re.search(
        r"^  preemptions    \d+( \(\d+ continued, \d+ restarted\);.*)?$", summary, re.MULTILINE
    )
    # Preemption on the embedded model continues (llama-server takes prefill): nothing redone.
    assert re.search(
        r"^  preemptions    (0|.* 0 restarted\); 0 tokens decoded again)", summary, re.MULTILINE
    )
    assert re.search(r"^  rescues        \d+", summary, re.MULTILINE)


# --- the live view and the public surface --------------------------------------------------------


async def test_live_view_renders_agents_slot_and_recent_events() -> None:
    """The live view shows each agent's state and counters, the slot line and the event log."""
    monitor = _monitor()
    monitor.begin("writer")
    monitor.on_attempt("writer")
    monitor.on_chunk("writer", TextDeltaChunk("{"))
    monitor.begin("voice")
    monitor.on_attempt_cancelled("writer")
    monitor.slot_stats(
        SlotStats(
            name="slot",
            queue_depth=2,
            running=True,
            submitted=5,
            completed=3,
            failed=0,
            abandoned=0,
            rejected=0,
            evicted=0,
            preemptions=1,
            continued=1,
            restarted=0,
            backend_cuts=0,
            tokens_redecoded=0,
            prompt_tokens_reprocessed=0,
            prompt_tokens_resumed=0,
            cache_hits=0,
            busy_s=3.0,
            uptime_s=4.0,
            waits={},
        )
    )
    console = Console(record=True, width=130, color_system=None)
    console.print(render(monitor, "forge-rt demo"))
    text = console.export_text()
    assert re.search(r"writer +10 +queued \(preempted\) +0 +0 +0 +0 +1 +0\.00 s", text), text
    assert re.search(r"voice +0 +queued ", text), text
    # The writer was preempted and the voice is only queued: the slot is busy, no agent's call
    # is generating yet.
    assert "slot busy · queue 2 · 3 inferences done · preemptions 1 · busy 75%" in text
    assert "writer      preempted by voice after 1 generated tokens" in text


def test_public_surface_matches_all() -> None:
    """forge_rt.demo exports exactly the names in __all__, each of them defined."""
    import forge_rt.demo as demo

    public = {
        name
        for name, value in vars(demo).items()
        if not name.startswith("_") and not isinstance(value, type(demo))
    }
    assert public == set(demo.__all__)

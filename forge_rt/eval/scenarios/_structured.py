"""Prerequisite, compaction, multi-turn, stateful and multi-agent contention scenarios."""

from __future__ import annotations

import functools

from forge_rt.core import Prerequisite
from forge_rt.errors import ToolResolutionError
from forge_rt.eval._scenario import Contender, Scenario, ScenarioRun, Verdict
from forge_rt.eval.scenarios._basic import HELPFUL, WEATHER, weather_tool
from forge_rt.eval.scenarios._kit import (
    by_conversation,
    call,
    contains_all,
    make_tool,
    plan_oracle,
    workflow,
)

__all__ = ["COMPACTION", "CONTENTION", "MULTITURN", "PREREQUISITES", "STATEFUL"]


# --- prerequisites -------------------------------------------------------------------------------

FILES = {"/notes/todo.txt": "buy milk; call Ada at 5pm", "/notes/plan.txt": "ship v2 on Friday"}


def _file_tools(match: bool) -> list:  # type: ignore[type-arg]
    opened: set[str] = set()

    def open_file(path: str) -> str:
        if path not in FILES:
            raise ToolResolutionError(f"no file {path!r}; files: {sorted(FILES)}")
        opened.add(path)
        return f"opened {path}"

    def read_file(path: str) -> str:
        if path not in FILES:
            raise ToolResolutionError(f"no file {path!r}; files: {sorted(FILES)}")
        return FILES[path]

    prereq = Prerequisite(tool="open_file", match_arg="path") if match else "open_file"
    return [
        make_tool("open_file", "Open a file before reading it.", {"path": "string"}, open_file),
        make_tool(
            "read_file",
            "Read an opened file.",
            {"path": "string"},
            read_file,
            prerequisites=[prereq],
        ),
    ]


def _prereq_name() -> ScenarioRun:
    return ScenarioRun(
        workflow=workflow(
            "prereq_name",
            _file_tools(False),
            HELPFUL + "Files must be opened before reading.",
            required=["read_file"],
        ),
        turns=("What time do I call Ada? It's in /notes/todo.txt.",),
        judge=contains_all("5pm"),
    )


def _prereq_arg() -> ScenarioRun:
    return ScenarioRun(
        workflow=workflow(
            "prereq_arg",
            _file_tools(True),
            HELPFUL + "Open the exact file you read.",
            required=["read_file"],
        ),
        turns=("When does v2 ship? See /notes/plan.txt.",),
        judge=contains_all("Friday"),
    )


def _prereq_chain() -> ScenarioRun:
    log: list[str] = []

    def run_tests(target: str) -> str:
        log.append("test")
        return "42 tests passed"

    def build(target: str) -> str:
        log.append("build")
        return "built artifact app-1.4.2.tar"

    def deploy(artifact: str) -> str:
        log.append("deploy")
        return f"deployed {artifact} to production"

    tools = [
        make_tool("run_tests", "Run the test suite.", {"target": "string"}, run_tests),
        make_tool(
            "build",
            "Build the release artifact.",
            {"target": "string"},
            build,
            prerequisites=["run_tests"],
        ),
        make_tool(
            "deploy", "Deploy an artifact.", {"artifact": "string"}, deploy, prerequisites=["build"]
        ),
    ]

    def judge(output: str) -> Verdict:
        if log[-3:] == ["test", "build", "deploy"] and "app-1.4.2" in output:
            return Verdict(True)
        return Verdict(False, f"steps {log}, output {output[:80]!r}")

    return ScenarioRun(
        workflow=workflow(
            "prereq_chain",
            tools,
            HELPFUL + "Test, build, then deploy the built artifact.",
            terminal="deploy",
        ),
        turns=("Release the app.",),
        judge=judge,
        state=log,
    )


PREREQUISITES = [
    Scenario(
        name="prereq_name",
        tags=("prerequisites",),
        description="read_file needs open_file first (by name)",
        build=_prereq_name,
        ideal_calls=3,
        oracle=plan_oracle(
            [
                call("open_file", path="/notes/todo.txt"),
                call("read_file", path="/notes/todo.txt"),
                call("respond", message="Call Ada at 5pm."),
            ]
        ),
    ),
    Scenario(
        name="prereq_arg",
        tags=("prerequisites",),
        description="read_file(path) needs open_file with the same path",
        build=_prereq_arg,
        ideal_calls=3,
        oracle=plan_oracle(
            [
                call("open_file", path="/notes/plan.txt"),
                call("read_file", path="/notes/plan.txt"),
                call("respond", message="v2 ships on Friday."),
            ]
        ),
    ),
    Scenario(
        name="prereq_chain",
        tags=("prerequisites",),
        description="deploy needs build needs tests",
        build=_prereq_chain,
        ideal_calls=3,
        oracle=plan_oracle(
            [
                call("run_tests", target="app"),
                call("build", target="app"),
                call("deploy", artifact="app-1.4.2.tar"),
            ]
        ),
    ),
]


# --- compaction ----------------------------------------------------------------------------------


def _compaction(name: str, lookups: int) -> ScenarioRun:
    def get_record(index: int) -> str:
        fact = "vault code 7319" if index == 1 else f"nothing notable in record {index}"
        padding = " ".join(f"field{i}=value{i * index}" for i in range(60))
        return f"record {index}: {fact}. {padding}"

    return ScenarioRun(
        workflow=workflow(
            name,
            [
                make_tool(
                    "get_record",
                    "Fetch a numbered record (1, 2, 3, ...).",
                    {"index": "integer"},
                    get_record,
                )
            ],
            HELPFUL
            + f"Fetch records 1 to {lookups} one by one, then report the vault code you saw.",
            required=["get_record"],
        ),
        turns=(f"Read records 1 through {lookups} and tell me the vault code.",),
        judge=contains_all("7319"),
    )


def _compaction_scenario(name: str, lookups: int, budget: int) -> Scenario:
    plan = [call("get_record", index=i) for i in range(1, lookups + 1)]
    plan.append(call("respond", message="The vault code is 7319."))
    return Scenario(
        name=name,
        tags=("compaction",),
        description=f"{lookups} long results under a {budget}-token budget; the answer is in the first",
        build=lambda: _compaction(name, lookups),
        ideal_calls=lookups + 1,
        oracle=plan_oracle(plan),
        budget_tokens=budget,
        max_iterations=lookups + 6,
    )


COMPACTION = [
    _compaction_scenario("compaction_tight", 5, 1200),
    _compaction_scenario("compaction_medium", 5, 2000),
    _compaction_scenario("compaction_roomy", 4, 3500),
]


# --- multi-turn ----------------------------------------------------------------------------------


def _multiturn_weather() -> ScenarioRun:
    return ScenarioRun(
        workflow=workflow("multiturn_weather", [weather_tool], HELPFUL),
        turns=("What's the weather in Paris?", "And in Rome?"),
        judge=contains_all("24"),
    )


def _multiturn_order() -> ScenarioRun:
    def order_status(order_id: str) -> str:
        if order_id != "ORD-0042":
            raise ToolResolutionError("unknown order; ids look like ORD-0042")
        return "ORD-0042: shipped"

    def delivery_date(order_id: str) -> str:
        if order_id != "ORD-0042":
            raise ToolResolutionError("unknown order; use the id from earlier in the conversation")
        return "ORD-0042 arrives on 2026-12-03"

    tools = [
        make_tool("order_status", "Status of an order.", {"order_id": "string"}, order_status),
        make_tool(
            "delivery_date",
            "Expected delivery date of an order.",
            {"order_id": "string"},
            delivery_date,
        ),
    ]
    return ScenarioRun(
        workflow=workflow("multiturn_order", tools, HELPFUL),
        turns=("Where is my order ORD-0042?", "When will it arrive?"),
        judge=contains_all("12-03"),
    )


def _multiturn_long() -> ScenarioRun:
    def add(a: float, b: float) -> str:
        return f"{a + b:g}"

    return ScenarioRun(
        workflow=workflow(
            "multiturn_long",
            [make_tool("add", "Add two numbers.", {"a": "number", "b": "number"}, add)],
            HELPFUL + "Use add for every sum.",
        ),
        turns=("What is 17 + 25?", "Add 8 to that.", "Now add 100.", "And add 0.5 to it."),
        judge=contains_all("150.5"),
    )


MULTITURN = [
    Scenario(
        name="multiturn_weather",
        tags=("multiturn",),
        description="a follow-up question relies on the first turn",
        build=_multiturn_weather,
        ideal_calls=4,
        oracle=plan_oracle(
            [
                call("get_weather", city="Paris"),
                call("respond", message=f"Paris: {WEATHER['Paris']}"),
            ],
            [call("get_weather", city="Rome"), call("respond", message=f"Rome: {WEATHER['Rome']}")],
        ),
    ),
    Scenario(
        name="multiturn_order",
        tags=("multiturn",),
        description="the second turn needs an id from the first",
        build=_multiturn_order,
        ideal_calls=4,
        oracle=plan_oracle(
            [call("order_status", order_id="ORD-0042"), call("respond", message="It shipped.")],
            [
                call("delivery_date", order_id="ORD-0042"),
                call("respond", message="It arrives 2026-12-03."),
            ],
        ),
    ),
    Scenario(
        name="multiturn_long",
        tags=("multiturn",),
        description="four turns, each building on the last result",
        build=_multiturn_long,
        ideal_calls=8,
        max_iterations=20,
        oracle=plan_oracle(
            [call("add", a=17, b=25), call("respond", message="42")],
            [call("add", a=42, b=8), call("respond", message="50")],
            [call("add", a=50, b=100), call("respond", message="150")],
            [call("add", a=150, b=0.5), call("respond", message="150.5")],
        ),
    ),
]


# --- stateful twins ------------------------------------------------------------------------------


def _ticket() -> ScenarioRun:
    tickets: list[dict[str, str]] = []

    def create_ticket(title: str, priority: str) -> str:
        if priority not in ("low", "normal", "high"):
            raise ToolResolutionError("priority must be one of low, normal, high")
        tickets.append({"title": title, "priority": priority})
        return f"ticket T-{len(tickets)} created"

    def judge(output: str) -> Verdict:
        ok = (
            len(tickets) == 1
            and tickets[0]["priority"] == "high"
            and "printer" in tickets[0]["title"].lower()
        )
        return Verdict(ok, "" if ok else f"tickets: {tickets}")

    return ScenarioRun(
        workflow=workflow(
            "ticket",
            [
                make_tool(
                    "create_ticket",
                    "Open a support ticket.",
                    {"title": "string", "priority": "string"},
                    create_ticket,
                )
            ],
            HELPFUL,
            required=["create_ticket"],
        ),
        turns=("The printer is on fire! Open an urgent (high priority) ticket.",),
        judge=judge,
        state=tickets,
    )


def _todo() -> ScenarioRun:
    todos = {1: ["water plants", False], 2: ["file taxes", False], 3: ["walk dog", False]}

    def list_todos() -> str:
        return "; ".join(f"{k}: {v[0]}" for k, v in todos.items())

    def complete_todo(todo_id: int) -> str:
        if todo_id not in todos:
            raise ToolResolutionError(f"no todo {todo_id}; list them first")
        todos[todo_id][1] = True
        return f"todo {todo_id} done"

    def judge(output: str) -> Verdict:
        done = [k for k, v in todos.items() if v[1]]
        return Verdict(done == [2], "" if done == [2] else f"completed {done}")

    tools = [
        make_tool("list_todos", "List todo items with ids.", {}, list_todos),
        make_tool(
            "complete_todo", "Mark a todo done by id.", {"todo_id": "integer"}, complete_todo
        ),
    ]
    return ScenarioRun(
        workflow=workflow("todo", tools, HELPFUL, required=["list_todos", "complete_todo"]),
        turns=("I filed my taxes, tick that off.",),
        judge=judge,
        state=todos,
    )


def _kv_store() -> ScenarioRun:
    store: dict[str, str] = {}

    def put(key: str, value: str) -> str:
        store[key] = value
        return f"stored {key}"

    def judge(output: str) -> Verdict:
        ok = store == {"wifi_password": "hunter2"}
        return Verdict(ok, "" if ok else f"store: {store}")

    return ScenarioRun(
        workflow=workflow(
            "kv_store",
            [
                make_tool(
                    "put", "Store a value under a key.", {"key": "string", "value": "string"}, put
                )
            ],
            HELPFUL,
            required=["put"],
        ),
        turns=("Remember that the wifi_password is hunter2 (use that exact key).",),
        judge=judge,
        state=store,
    )


STATEFUL = [
    Scenario(
        name="ticket",
        tags=("stateful",),
        description="create exactly one high-priority ticket",
        build=_ticket,
        ideal_calls=2,
        oracle=plan_oracle(
            [
                call("create_ticket", title="Printer on fire", priority="high"),
                call("respond", message="Ticket T-1 opened."),
            ]
        ),
    ),
    Scenario(
        name="todo",
        tags=("stateful",),
        description="find the right id, complete only it",
        build=_todo,
        ideal_calls=3,
        oracle=plan_oracle(
            [call("list_todos"), call("complete_todo", todo_id=2), call("respond", message="Done.")]
        ),
    ),
    Scenario(
        name="kv_store",
        tags=("stateful",),
        description="store exactly one key",
        build=_kv_store,
        ideal_calls=2,
        oracle=plan_oracle(
            [call("put", key="wifi_password", value="hunter2"), call("respond", message="Saved.")]
        ),
    ),
]


# --- multi-agent contention ----------------------------------------------------------------------


def _research(topic: str) -> ScenarioRun:
    def search(query: str) -> str:
        return f"3 sources on {query}: a survey, a benchmark and a blog post"

    def summarize(text: str) -> str:
        return f"summary of {len(text)} characters"

    tools = [
        make_tool("search", "Search the library.", {"query": "string"}, search),
        make_tool("summarize", "Summarize text.", {"text": "string"}, summarize),
    ]
    return ScenarioRun(
        workflow=workflow(
            f"research_{topic}",
            tools,
            HELPFUL + "Search, summarize, then respond.",
            required=["search", "summarize"],
        ),
        turns=(f"Research {topic} for me.",),
        judge=contains_all(""),
    )


def _research_plan(topic: str) -> list:  # type: ignore[type-arg]
    return [
        call("search", query=topic),
        call("summarize", text=f"sources on {topic}"),
        call("respond", message=f"{topic}: summarised."),
    ]


def _contention(name: str, background: int) -> Scenario:
    topics = ["solar panels", "sourdough", "tide pools", "bridges"][:background]
    oracles = {f"Research {t} for me.": plan_oracle(_research_plan(t)) for t in topics}
    oracles["What's the weather in Rome?"] = plan_oracle(
        [call("get_weather", city="Rome"), call("respond", message=f"Rome: {WEATHER['Rome']}")]
    )

    def voice() -> ScenarioRun:
        return ScenarioRun(
            workflow=workflow(
                f"{name}_voice", [weather_tool], HELPFUL + "Be brief: this is spoken."
            ),
            turns=("What's the weather in Rome?",),
            judge=contains_all("24"),
        )

    return Scenario(
        name=name,
        tags=("contention",),
        description=f"a high-priority voice request while {background} background agents share the slot",
        build=voice,
        ideal_calls=2,
        oracle=by_conversation(oracles),
        priority=0,
        contenders=tuple(
            Contender(build=functools.partial(_research, t), priority=10, label=t) for t in topics
        ),
    )


CONTENTION = [
    _contention("contention_voice_1bg", 1),
    _contention("contention_voice_3bg", 3),
    _contention("contention_voice_4bg", 4),
]

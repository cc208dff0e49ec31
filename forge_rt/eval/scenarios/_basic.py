"""Plumbing, model-quality and advanced scenarios: deterministic tools, judged final answers."""

from __future__ import annotations

from forge_rt.errors import ToolResolutionError
from forge_rt.eval._scenario import Scenario, ScenarioRun
from forge_rt.eval.scenarios._kit import (
    call,
    contains_all,
    make_tool,
    plan_oracle,
    workflow,
)

__all__ = ["ADVANCED", "PLUMBING", "QUALITY"]

HELPFUL = "You are a precise assistant. Use the tools to get facts; never invent them. "

WEATHER = {
    "Paris": "18C, light rain",
    "Rome": "24C, sunny",
    "Oslo": "3C, snow",
    "Cairo": "31C, clear",
}


def _weather(city: str) -> str:
    if city not in WEATHER:
        raise ToolResolutionError(f"unknown city {city!r}; known cities: {sorted(WEATHER)}")
    return f"Weather in {city}: {WEATHER[city]}"


weather_tool = make_tool("get_weather", "Current weather for a city.", {"city": "string"}, _weather)


# --- plumbing ------------------------------------------------------------------------------------


def _basic_2step() -> ScenarioRun:
    return ScenarioRun(
        workflow=workflow(
            "basic_2step",
            [weather_tool],
            HELPFUL + "Answer with the respond tool.",
            required=["get_weather"],
        ),
        turns=("What is the weather in Paris right now?",),
        judge=contains_all("18"),
    )


SALES = {(4, 2024): [120, 340, 90]}


def _sequential_3step() -> ScenarioRun:
    def fetch_sales_data(quarter: int, year: int) -> str:
        rows = SALES.get((quarter, year))
        if rows is None:
            raise ToolResolutionError("no data; only quarter=4 year=2024 exists")
        return f"sales Q{quarter} {year}: {rows}"

    def analyze_sales(data: str) -> str:
        return "total 550, best week 340"

    reported: list[str] = []

    def report(findings: str) -> str:
        reported.append(findings)
        return "report filed"

    tools = [
        make_tool(
            "fetch_sales_data",
            "Sales rows for a quarter.",
            {"quarter": "integer", "year": "integer"},
            fetch_sales_data,
        ),
        make_tool(
            "analyze_sales", "Analyze fetched sales data.", {"data": "string"}, analyze_sales
        ),
        make_tool(
            "report", "File the final report with the findings.", {"findings": "string"}, report
        ),
    ]
    return ScenarioRun(
        workflow=workflow(
            "sequential_3step",
            tools,
            HELPFUL + "Fetch the data, analyze it, then file a report.",
            required=["fetch_sales_data", "analyze_sales"],
            terminal="report",
        ),
        turns=("Report the sales for Q4 2024.",),
        judge=lambda output: contains_all("550")(" ".join(reported)),
        state=reported,
    )


def _error_recovery() -> ScenarioRun:
    def lookup_order(order_id: str) -> str:
        if not (order_id.startswith("ORD-") and len(order_id) == 8 and order_id[4:].isdigit()):
            raise ToolResolutionError(
                f"order_id {order_id!r} has the wrong format: use ORD- and 4 digits, e.g. ORD-0042"
            )
        if order_id != "ORD-0042":
            raise ToolResolutionError(f"no order {order_id}")
        return "ORD-0042: shipped on 2026-11-20 by courier"

    return ScenarioRun(
        workflow=workflow(
            "error_recovery",
            [
                make_tool(
                    "lookup_order", "Status of an order.", {"order_id": "string"}, lookup_order
                )
            ],
            HELPFUL + "Order ids look like ORD-0042.",
            required=["lookup_order"],
        ),
        turns=("What's the status of order 42?",),
        judge=contains_all("shipped"),
    )


def _single_lookup() -> ScenarioRun:
    def get_time(zone: str) -> str:
        return {"UTC": "14:05", "CET": "15:05"}.get(zone.upper(), "unknown zone; use UTC or CET")

    return ScenarioRun(
        workflow=workflow(
            "single_lookup",
            [
                make_tool(
                    "get_time",
                    "Current time in a time zone (UTC or CET).",
                    {"zone": "string"},
                    get_time,
                )
            ],
            HELPFUL,
            required=["get_time"],
        ),
        turns=("What time is it in UTC?",),
        judge=contains_all("14:05"),
    )


def _ordered_steps() -> ScenarioRun:
    saved: list[str] = []

    def validate(record: str) -> str:
        return "valid" if "name=" in record else "invalid: needs name=<value>"

    def save(record: str) -> str:
        saved.append(record)
        return "saved as #17"

    def confirm(record_number: int) -> str:
        return f"record #{record_number} confirmed"

    tools = [
        make_tool("validate", "Validate a record string.", {"record": "string"}, validate),
        make_tool("save", "Save a record string.", {"record": "string"}, save),
        make_tool(
            "confirm", "Confirm a saved record by number.", {"record_number": "integer"}, confirm
        ),
    ]
    return ScenarioRun(
        workflow=workflow(
            "ordered_steps",
            tools,
            HELPFUL + "Validate, then save, then confirm the record.",
            required=["validate", "save"],
            terminal="confirm",
        ),
        turns=("Store the record name=Ada.",),
        judge=contains_all("#17"),
        state=saved,
    )


PLUMBING = [
    Scenario(
        name="basic_2step",
        tags=("plumbing",),
        description="one lookup, then respond",
        build=_basic_2step,
        ideal_calls=2,
        oracle=plan_oracle(
            [call("get_weather", city="Paris"), call("respond", message="Paris: 18C, light rain")]
        ),
    ),
    Scenario(
        name="sequential_3step",
        tags=("plumbing",),
        description="fetch, analyze, report with required steps",
        build=_sequential_3step,
        ideal_calls=3,
        oracle=plan_oracle(
            [
                call("fetch_sales_data", quarter=4, year=2024),
                call("analyze_sales", data="[120, 340, 90]"),
                call("report", findings="Q4 2024 total 550"),
            ]
        ),
    ),
    Scenario(
        name="error_recovery",
        tags=("plumbing",),
        description="a tool rejects a bad id format; the model must follow the hint",
        build=_error_recovery,
        ideal_calls=2,
        oracle=plan_oracle(
            [call("lookup_order", order_id="ORD-0042"), call("respond", message="It shipped.")]
        ),
    ),
    Scenario(
        name="single_lookup",
        tags=("plumbing",),
        description="one argument, one lookup",
        build=_single_lookup,
        ideal_calls=2,
        oracle=plan_oracle([call("get_time", zone="UTC"), call("respond", message="14:05 UTC")]),
    ),
    Scenario(
        name="ordered_steps",
        tags=("plumbing",),
        description="validate then save then confirm (terminal)",
        build=_ordered_steps,
        ideal_calls=3,
        oracle=plan_oracle(
            [
                call("validate", record="name=Ada"),
                call("save", record="name=Ada"),
                call("confirm", record_number=17),
            ]
        ),
    ),
]


# --- model quality -------------------------------------------------------------------------------


def _distractors() -> list:  # type: ignore[type-arg]
    def nothing(**_: object) -> str:
        return "not relevant to this request"

    return [
        make_tool("send_email", "Send an email.", {"to": "string", "body": "string"}, nothing),
        make_tool("create_calendar_event", "Create an event.", {"title": "string"}, nothing),
        make_tool(
            "translate_text", "Translate text.", {"text": "string", "lang": "string"}, nothing
        ),
        make_tool("get_news", "Latest news headlines.", {"topic": "string"}, nothing),
    ]


def _tool_selection() -> ScenarioRun:
    def get_stock_price(symbol: str) -> str:
        prices = {"ACME": "412.30 USD"}
        if symbol.upper() not in prices:
            raise ToolResolutionError(f"unknown symbol {symbol!r}; try ACME")
        return f"{symbol.upper()}: {prices[symbol.upper()]}"

    tools = [
        *_distractors(),
        make_tool(
            "get_stock_price",
            "Latest stock price for a ticker symbol.",
            {"symbol": "string"},
            get_stock_price,
        ),
    ]
    return ScenarioRun(
        workflow=workflow("tool_selection", tools, HELPFUL, required=["get_stock_price"]),
        turns=("What's ACME trading at?",),
        judge=contains_all("412.30"),
    )


def _argument_fidelity() -> ScenarioRun:
    def search_users(name: str) -> str:
        if "grace" not in name.lower():
            return "no users match"
        return "1 match: Grace Hopper, user_id=u-7f3a9"

    def get_user_email(user_id: str) -> str:
        if user_id != "u-7f3a9":
            raise ToolResolutionError(f"no user {user_id!r}; copy the user_id from search_users")
        return "grace.hopper@navy.example"

    tools = [
        make_tool("search_users", "Find users by name.", {"name": "string"}, search_users),
        make_tool(
            "get_user_email", "Email address for a user id.", {"user_id": "string"}, get_user_email
        ),
    ]
    return ScenarioRun(
        workflow=workflow(
            "argument_fidelity", tools, HELPFUL, required=["search_users", "get_user_email"]
        ),
        turns=("What is Grace Hopper's email address?",),
        judge=contains_all("grace.hopper@navy.example"),
    )


def _currency_chain() -> ScenarioRun:
    def get_exchange_rate(base: str, quote: str) -> str:
        if (base.upper(), quote.upper()) != ("EUR", "USD"):
            raise ToolResolutionError("only EUR->USD is available")
        return "1 EUR = 1.08 USD"

    def convert(amount: float, rate: float) -> str:
        return f"{amount * rate:.2f}"

    tools = [
        make_tool(
            "get_exchange_rate",
            "Exchange rate between currencies.",
            {"base": "string", "quote": "string"},
            get_exchange_rate,
        ),
        make_tool(
            "convert",
            "Multiply an amount by a rate.",
            {"amount": "number", "rate": "number"},
            convert,
        ),
    ]
    return ScenarioRun(
        workflow=workflow(
            "currency_chain", tools, HELPFUL, required=["get_exchange_rate", "convert"]
        ),
        turns=("How many US dollars is 250 euros?",),
        judge=contains_all("270"),
    )


def _conditional_routing() -> ScenarioRun:
    orders: list[str] = []

    def check_inventory(item: str) -> str:
        return (
            "widget: 0 in stock, restock in 5 days" if "widget" in item.lower() else "unknown item"
        )

    def place_order(item: str) -> str:
        orders.append(f"order:{item}")
        return "order placed"

    def notify_backorder(item: str) -> str:
        orders.append(f"backorder:{item}")
        return "customer notified of backorder"

    tools = [
        make_tool(
            "check_inventory", "Stock level of an item.", {"item": "string"}, check_inventory
        ),
        make_tool(
            "place_order", "Order an item that is in stock.", {"item": "string"}, place_order
        ),
        make_tool(
            "notify_backorder",
            "Tell the customer an item is out of stock.",
            {"item": "string"},
            notify_backorder,
        ),
    ]

    def judge(output: str) -> object:
        from forge_rt.eval._scenario import Verdict

        if orders and orders[-1].startswith("backorder:"):
            return Verdict(True)
        return Verdict(False, f"expected a backorder notice, got {orders}")

    return ScenarioRun(
        workflow=workflow(
            "conditional_routing",
            tools,
            HELPFUL
            + "Check stock first. If it is in stock place the order, otherwise notify a backorder.",
            required=["check_inventory"],
            terminal=["place_order", "notify_backorder"],
        ),
        turns=("Please order one widget for me.",),
        judge=judge,  # type: ignore[arg-type]
        state=orders,
    )


def _data_gap() -> ScenarioRun:
    def get_population(city: str) -> str:
        if city.lower() in ("canberra",):
            return "Canberra: 467,000 people"
        raise ToolResolutionError(
            f"no data for {city!r}; this dataset only has capital cities (Australia's is Canberra)"
        )

    return ScenarioRun(
        workflow=workflow(
            "data_gap",
            [
                make_tool(
                    "get_population",
                    "Population of a capital city.",
                    {"city": "string"},
                    get_population,
                )
            ],
            HELPFUL + "If a tool says data is missing, follow its hint.",
            required=["get_population"],
        ),
        turns=("What is the population of Australia's capital? Start by trying Sydney.",),
        judge=contains_all("467"),
    )


def _relevance() -> ScenarioRun:
    return ScenarioRun(
        workflow=workflow(
            "relevance",
            [weather_tool, *_distractors()],
            HELPFUL + "Only call a tool when the request needs it; otherwise just respond.",
        ),
        turns=("Say hello back to me in one short sentence.",),
        judge=lambda output: contains_all("hello")(output),
    )


def _unit_conversion() -> ScenarioRun:
    def convert_units(value: float, from_unit: str, to_unit: str) -> str:
        if (from_unit.lower(), to_unit.lower()) in (("km", "miles"), ("kilometers", "miles")):
            return f"{value * 0.621371:.1f} miles"
        raise ToolResolutionError("supported: km -> miles")

    return ScenarioRun(
        workflow=workflow(
            "unit_conversion",
            [
                make_tool(
                    "convert_units",
                    "Convert a value between units.",
                    {"value": "number", "from_unit": "string", "to_unit": "string"},
                    convert_units,
                )
            ],
            HELPFUL,
            required=["convert_units"],
        ),
        turns=("How many miles is 42 km?",),
        judge=contains_all("26.1"),
    )


QUALITY = [
    Scenario(
        name="tool_selection",
        tags=("quality",),
        description="pick the right tool among distractors",
        build=_tool_selection,
        ideal_calls=2,
        oracle=plan_oracle(
            [
                call("get_stock_price", symbol="ACME"),
                call("respond", message="ACME is at 412.30 USD"),
            ]
        ),
    ),
    Scenario(
        name="argument_fidelity",
        tags=("quality",),
        description="copy an id from one tool result into the next call",
        build=_argument_fidelity,
        ideal_calls=3,
        oracle=plan_oracle(
            [
                call("search_users", name="Grace Hopper"),
                call("get_user_email", user_id="u-7f3a9"),
                call("respond", message="grace.hopper@navy.example"),
            ]
        ),
    ),
    Scenario(
        name="currency_chain",
        tags=("quality",),
        description="rate lookup then arithmetic with the looked-up rate",
        build=_currency_chain,
        ideal_calls=3,
        oracle=plan_oracle(
            [
                call("get_exchange_rate", base="EUR", quote="USD"),
                call("convert", amount=250, rate=1.08),
                call("respond", message="250 EUR is 270.00 USD"),
            ]
        ),
    ),
    Scenario(
        name="conditional_routing",
        tags=("quality",),
        description="branch on a tool result: order or backorder",
        build=_conditional_routing,
        ideal_calls=2,
        oracle=plan_oracle(
            [call("check_inventory", item="widget"), call("notify_backorder", item="widget")]
        ),
    ),
    Scenario(
        name="data_gap",
        tags=("quality",),
        description="recover from missing data by following the tool's hint",
        build=_data_gap,
        ideal_calls=2,
        oracle=plan_oracle(
            [
                call("get_population", city="Canberra"),
                call("respond", message="About 467,000 people"),
            ]
        ),
    ),
    Scenario(
        name="relevance",
        tags=("quality",),
        description="decline to call unrelated tools; just respond",
        build=_relevance,
        ideal_calls=1,
        oracle=plan_oracle([call("respond", message="Hello to you too!")]),
    ),
    Scenario(
        name="unit_conversion",
        tags=("quality",),
        description="numeric arguments from the request",
        build=_unit_conversion,
        ideal_calls=2,
        oracle=plan_oracle(
            [
                call("convert_units", value=42, from_unit="km", to_unit="miles"),
                call("respond", message="42 km is 26.1 miles"),
            ]
        ),
    ),
]


# --- advanced ------------------------------------------------------------------------------------


def _multi_hop() -> ScenarioRun:
    def get_employee(name: str) -> str:
        if "sarah" not in name.lower():
            raise ToolResolutionError("no such employee; try Sarah Chen")
        return "Sarah Chen: dept_id=D-12"

    def get_department(dept_id: str) -> str:
        if dept_id != "D-12":
            raise ToolResolutionError(f"no department {dept_id!r}")
        return "D-12 Research, manager_id=E-301"

    def get_manager(manager_id: str) -> str:
        if manager_id != "E-301":
            raise ToolResolutionError(f"no employee {manager_id!r}")
        return "E-301 is Priya Natarajan"

    tools = [
        make_tool("get_employee", "Employee record by name.", {"name": "string"}, get_employee),
        make_tool("get_department", "Department by id.", {"dept_id": "string"}, get_department),
        make_tool("get_manager", "Employee name by id.", {"manager_id": "string"}, get_manager),
    ]
    return ScenarioRun(
        workflow=workflow(
            "multi_hop", tools, HELPFUL, required=["get_employee", "get_department", "get_manager"]
        ),
        turns=("Who manages Sarah Chen's department?",),
        judge=contains_all("Priya"),
    )


def _aggregate() -> ScenarioRun:
    totals = {"A-1": 40, "A-2": 65}

    def list_orders(customer: str) -> str:
        return "orders: A-1, A-2"

    def get_order_total(order_id: str) -> str:
        if order_id not in totals:
            raise ToolResolutionError(f"no order {order_id!r}; ids are A-1 and A-2")
        return f"{order_id} total: {totals[order_id]} EUR"

    tools = [
        make_tool("list_orders", "Order ids of a customer.", {"customer": "string"}, list_orders),
        make_tool(
            "get_order_total", "Total of one order.", {"order_id": "string"}, get_order_total
        ),
    ]
    return ScenarioRun(
        workflow=workflow(
            "aggregate",
            tools,
            HELPFUL + "Sum the totals yourself.",
            required=["list_orders", "get_order_total"],
        ),
        turns=("How much has customer Lin spent in total?",),
        judge=contains_all("105"),
    )


def _compare() -> ScenarioRun:
    return ScenarioRun(
        workflow=workflow("compare", [weather_tool], HELPFUL, required=["get_weather"]),
        turns=("Which is warmer right now, Oslo or Cairo?",),
        judge=contains_all("Cairo"),
    )


ADVANCED = [
    Scenario(
        name="multi_hop",
        tags=("advanced",),
        description="three lookups, each needing an id from the previous result",
        build=_multi_hop,
        ideal_calls=4,
        oracle=plan_oracle(
            [
                call("get_employee", name="Sarah Chen"),
                call("get_department", dept_id="D-12"),
                call("get_manager", manager_id="E-301"),
                call("respond", message="Priya Natarajan manages Research."),
            ]
        ),
    ),
    Scenario(
        name="aggregate",
        tags=("advanced",),
        description="fan out over listed ids and sum",
        build=_aggregate,
        ideal_calls=4,
        oracle=plan_oracle(
            [
                call("list_orders", customer="Lin"),
                call("get_order_total", order_id="A-1"),
                call("get_order_total", order_id="A-2"),
                call("respond", message="Lin spent 105 EUR."),
            ]
        ),
    ),
    Scenario(
        name="compare",
        tags=("advanced",),
        description="two lookups, then a comparison",
        build=_compare,
        ideal_calls=3,
        oracle=plan_oracle(
            [
                call("get_weather", city="Oslo"),
                call("get_weather", city="Cairo"),
                call("respond", message="Cairo is warmer (31C vs 3C)."),
            ]
        ),
    ),
]

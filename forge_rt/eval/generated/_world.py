"""One case's world: a domain's records drawn from the case's RNG, and every tool over them.

A :class:`World` holds the data a case's tools answer from -- the domain's chain of linked
records, a dated log, zone readings, the stateful records a run starts with -- and builds the
domain's full tool set as :class:`~forge_rt.eval.generated._tools.ToolPlan` values. A case
picks the tools it needs and adds some of the rest as distractors: they are real, working
tools of the same domain, so they look related, but answer nothing the request asks.

The tools' error messages are drawn per world from several phrasings: some state the
expected format (in words or as a regex), some list the valid choices, some give only a status
or error code.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forge_rt.errors import ToolResolutionError
from forge_rt.eval.generated._domains import Domain
from forge_rt.eval.generated._tools import (
    RunState,
    ServiceUnavailable,
    ToolPlan,
    object_schema,
    pick_style,
    render,
    snake,
)
from forge_rt.eval.generated._values import (
    ID_FAMILIES,
    ID_FORMATS,
    ID_PATTERNS,
    PREFIX_CODE,
    IdMaker,
    fact_value,
    iso_date,
    person_name,
)

__all__ = ["Link", "World", "make_world"]

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

_FORMAT_ERRORS = (
    "{field} {value!r} is malformed: expected {words}.",
    "400 Bad Request: `{field}` must match {pattern}",
    "invalid {noun} id {value!r}; {noun} ids are {words}",
    "cannot parse {value!r} as a {noun} id (format: {pattern})",
)
_NOT_FOUND_ERRORS = (
    "no {noun} with id {value!r}",
    "404: {noun} {value!r} not found; use an id a tool returned",
    "unknown {field} {value!r}",
)
_NAME_ERRORS = (
    "no {noun} named {value!r}",
    "{value!r} matched no {noun}; check the spelling",
    "lookup failed: 0 {noun} records for name={value!r}",
)
_CHOICE_ERRORS = (
    "unknown {param} {value!r}; valid {param}s: {choices}",
    "{param} must be one of {choices} (got {value!r})",
    "{value!r} is not a {param} id. Known ids: {choices}",
    "422 Unprocessable Entity: {param} not in [{choices}]",
)
_DATE_ERRORS = (
    "date {value!r} is not in ISO format (YYYY-MM-DD)",
    "unparseable date {value!r}: write the year first, then month and day, joined by hyphens",
    "400: `date` must match ^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}$",
    "Dates are written YYYY-MM-DD here; {value!r} is not.",
)
_OUTAGES = (
    "503 Service Unavailable",
    "HTTP 504: upstream timed out",
    "status=BUSY (code E_LOCK_HELD)",
    "error 429: rate limit exceeded",
    "backend returned code 502",
)
_STUB_REPLIES = ("accepted", "queued for review", "nothing to report", "ok")


@dataclass(frozen=True)
class Link:
    """One record of a chain level: its id, its fact, and the id of the next level's record
    it links to (``None`` on the last level)."""

    id: str
    fact: str
    next_id: str | None


@dataclass(frozen=True)
class World:
    """The data of one case and the phrasing of its tools' errors (see the module docstring).

    ``names`` are the first level's records by name (each with its level-0 id in
    ``by_name``); ``levels[i]`` maps a level-``i`` id to its :class:`Link`; ``families[i]`` is
    the id family of level ``i``; ``patterns[i]`` is whether that level's id parameter
    carries a JSON-schema ``pattern``. ``records`` are the stateful records a run starts with
    and ``new_ids`` the ids ``create`` hands out, in order.
    """

    domain: Domain
    style: str
    names: tuple[str, ...]
    by_name: dict[str, str]
    levels: tuple[dict[str, Link], ...]
    families: tuple[IdMaker, ...]
    patterns: tuple[bool, ...]
    days: dict[str, str]
    zone_values: dict[str, str]
    records: dict[str, dict[str, Any]]
    record_family: IdMaker
    new_ids: tuple[str, ...]
    errors: dict[str, str]
    outage: str

    # --- names ----------------------------------------------------------------------------

    def noun(self, level: int) -> str:
        return self.domain.chain[level].noun

    def id_field(self, level: int) -> str:
        return f"{snake(self.noun(level))}_id"

    def fact_field(self, level: int) -> str:
        return snake(self.domain.chain[level].fact)

    def lookup_tool(self, level: int) -> str:
        """``get_<noun>``: the level's lookup by id."""
        return f"get_{snake(self.noun(level))}"

    @property
    def find_tool(self) -> str:
        """``find_<noun>``: the first level's lookup by name."""
        return f"find_{snake(self.noun(0))}"

    @property
    def record_noun(self) -> str:
        return snake(self.domain.record.noun)

    def record_tool(self, verb: str) -> str:
        """``list_<record>s``, ``create_<record>``, ``update_<record>``, ``delete_<record>``."""
        return f"list_{self.record_noun}s" if verb == "list" else f"{verb}_{self.record_noun}"

    @property
    def record_id_field(self) -> str:
        return f"{self.record_noun}_id"

    def path(self, name: str, depth: int) -> list[Link]:
        """The first ``depth`` links of the chain that starts at the record called ``name``."""
        links = [self.levels[0][self.by_name[name]]]
        while len(links) < depth:
            next_id = links[-1].next_id
            assert next_id is not None, "a chain is at most as deep as the domain's"
            links.append(self.levels[len(links)][next_id])
        return links

    # --- tools ----------------------------------------------------------------------------

    def plans(self) -> dict[str, ToolPlan]:
        """Every tool of the domain, by name."""
        plans = [
            self._find_plan(),
            *(self._lookup_plan(level) for level in range(len(self.levels))),
            self._dated_plan(),
            self._zones_plan(),
            *self._record_plans(),
            *self._stub_plans(),
        ]
        return {p.name: p for p in plans}

    def _link_fields(self, level: int, link: Link) -> dict[str, Any]:
        fields: dict[str, Any] = {self.id_field(level): link.id}
        fields[self.fact_field(level)] = link.fact
        if link.next_id is not None:
            fields[self.id_field(level + 1)] = link.next_id
        return fields

    def _find_plan(self) -> ToolPlan:
        noun = self.noun(0)

        def find(state: RunState, args: dict[str, Any]) -> str:
            name = str(args.get("name", ""))
            key = next((n for n in self.names if n.lower() == name.strip().lower()), None)
            if key is None:
                message = self.errors["name"].format(noun=noun, value=name)
                raise ToolResolutionError(message)
            if state.outages.get(self.find_tool, 0) > 0:
                state.outages[self.find_tool] -= 1
                raise ServiceUnavailable(self.outage)
            link = self.levels[0][self.by_name[key]]
            return render({"name": key, **self._link_fields(0, link)}, self.style)

        schema = object_schema(
            {
                "name": {"type": "string", "description": f"The {noun}'s name as people say it."},
                "detail": {
                    "type": "string",
                    "enum": ["summary", "full"],
                    "description": "How much to return (default summary).",
                },
                "include_archived": {
                    "type": "boolean",
                    "description": "Also search archived records.",
                },
            },
            optional=("detail", "include_archived"),
        )
        return ToolPlan(self.find_tool, f"Find a {noun} by name.", schema, find)

    def _lookup_plan(self, level: int) -> ToolPlan:
        noun, field, family = self.noun(level), self.id_field(level), self.families[level]
        records = self.levels[level]

        def lookup(state: RunState, args: dict[str, Any]) -> str:
            value = str(args.get(field, ""))
            if value not in records:
                pattern = ID_PATTERNS[family]
                template = "format" if not re.fullmatch(pattern, value) else "missing"
                message = self.errors[template].format(
                    field=field,
                    value=value,
                    noun=noun,
                    words=ID_FORMATS[family],
                    pattern=pattern,
                )
                raise ToolResolutionError(message)
            return render(self._link_fields(level, records[value]), self.style)

        prop: dict[str, Any] = {"type": "string", "description": f"The {noun}'s id."}
        if self.patterns[level]:
            prop["pattern"] = ID_PATTERNS[family]
        fact = self.domain.chain[level].fact
        return ToolPlan(
            self.lookup_tool(level),
            f"Look up a {noun} by id: its {fact} and linked records.",
            object_schema({field: prop}),
            lookup,
        )

    def _dated_plan(self) -> ToolPlan:
        dated = self.domain.dated

        def on_day(state: RunState, args: dict[str, Any]) -> str:
            day = str(args.get("date", ""))
            if not _ISO_DATE.match(day):
                raise ToolResolutionError(self.errors["date"].format(value=day))
            if day not in self.days:
                raise ToolResolutionError(f"no {dated.what} recorded on {day}")
            return render({"date": day, snake(dated.fact): self.days[day]}, self.style)

        schema = object_schema({"date": {"type": "string", "description": "The day."}})
        return ToolPlan(dated.tool, f"The {dated.fact} on one day.", schema, on_day)

    def _zones_plan(self) -> ToolPlan:
        zones = self.domain.zones

        def reading(state: RunState, args: dict[str, Any]) -> str:
            value = str(args.get(zones.param, ""))
            if value not in self.zone_values:
                message = self.errors["choice"].format(
                    param=zones.param, value=value, choices=", ".join(zones.choices)
                )
                raise ToolResolutionError(message)
            return render(
                {zones.param: value, snake(zones.fact): self.zone_values[value]}, self.style
            )

        schema = object_schema(
            {zones.param: {"type": "string", "description": f"Which {zones.param}."}}
        )
        return ToolPlan(zones.tool, f"Current {zones.fact} of a {zones.param}.", schema, reading)

    def _record_plans(self) -> list[ToolPlan]:
        rec = self.domain.record
        noun, id_field = rec.noun, self.record_id_field
        id_prop = {"type": "string", "pattern": ID_PATTERNS[self.record_family]}
        typed: dict[str, dict[str, Any]] = {
            rec.category: {"type": "string", "enum": list(rec.categories)},
            rec.integer: {"type": "integer", "minimum": 0},
            rec.number: {"type": "number", "minimum": 0},
            rec.boolean: {"type": "boolean"},
        }

        def listing(state: RunState, args: dict[str, Any]) -> str:
            wanted = args.get(rec.category)
            rows = [
                f"{rid} | {r['holder']} | {r[rec.category]}"
                for rid, r in state.records.items()
                if wanted is None or r[rec.category] == wanted
            ]
            return "\n".join(rows) if rows else f"no {noun}s"

        def create(state: RunState, args: dict[str, Any]) -> str:
            if state.created >= len(self.new_ids):
                raise ServiceUnavailable("507 Insufficient Storage")
            rid = self.new_ids[state.created]
            state.created += 1
            state.records[rid] = {
                "holder": args["holder"],
                **{k: args[k] for k in typed},
                "contact": dict(args["contact"]),
                "tags": list(args.get("tags", [])),
            }
            return render({"created": rid, "holder": args["holder"]}, self.style)

        def known(state: RunState, args: dict[str, Any]) -> str:
            rid = str(args.get(id_field, ""))
            if rid not in state.records:
                raise ToolResolutionError(
                    self.errors["missing"].format(
                        noun=noun, value=rid, field=id_field, words="", pattern=""
                    )
                )
            return rid

        def update(state: RunState, args: dict[str, Any]) -> str:
            rid = known(state, args)
            changes = dict(args.get("changes") or {})
            if not changes:
                raise ToolResolutionError(f"`changes` is empty: give at least one of {list(typed)}")
            state.records[rid].update(changes)
            return render({"updated": rid, **changes}, self.style)

        def delete(state: RunState, args: dict[str, Any]) -> str:
            rid = known(state, args)
            del state.records[rid]
            return render({"deleted": rid}, self.style)

        contact = object_schema(
            {
                "email": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+$"},
                "phone": {"type": "string"},
            },
            optional=("phone",),
        )
        create_schema = object_schema(
            {
                "holder": {"type": "string", "description": "Full name of the person it is for."},
                **typed,
                "contact": contact,
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
            },
            optional=("tags",),
        )
        changes: dict[str, Any] = {
            "type": "object",
            "properties": typed,
            "additionalProperties": False,
        }
        update_schema = object_schema({id_field: id_prop, "changes": changes})
        return [
            ToolPlan(
                self.record_tool("list"),
                f"List {noun}s (id | holder | {rec.category}), optionally of one {rec.category}.",
                object_schema({rec.category: typed[rec.category]}, optional=(rec.category,)),
                listing,
            ),
            ToolPlan(self.record_tool("create"), f"Create a {noun}.", create_schema, create, True),
            ToolPlan(
                self.record_tool("update"),
                f"Change fields of a {noun}.",
                update_schema,
                update,
                True,
            ),
            ToolPlan(
                self.record_tool("delete"),
                f"Delete a {noun}.",
                object_schema({id_field: id_prop}),
                delete,
                True,
            ),
        ]

    def _stub_plans(self) -> list[ToolPlan]:
        def stub(reply: str) -> Callable[[RunState, dict[str, Any]], str]:
            return lambda state, args: reply

        plans = []
        for index, (name, description) in enumerate(self.domain.distractors):
            schema = object_schema(
                {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                optional=("limit",),
            )
            plans.append(
                ToolPlan(name, description, schema, stub(_STUB_REPLIES[index % len(_STUB_REPLIES)]))
            )
        return plans


def _distinct(rng: random.Random, make: Callable[[random.Random], str], count: int) -> list[str]:
    """``count`` different values from ``make``."""
    seen: dict[str, None] = {}
    while len(seen) < count:
        seen.setdefault(make(rng))
    return list(seen)


def _fact(kind: str, rng: random.Random) -> str:
    return fact_value(kind, rng)


def make_world(rng: random.Random, domain: Domain, *, code_ids: bool = False) -> World:
    """A world for ``domain`` drawn from ``rng``; ``code_ids`` makes the first level's ids
    ``QF-0417`` codes (cases that write one in lower case rely on it)."""
    names = tuple(rng.sample(domain.names, 4))
    families = rng.sample(ID_FAMILIES, len(domain.chain))
    if code_ids and families[0] is not PREFIX_CODE:
        swap = families.index(PREFIX_CODE) if PREFIX_CODE in families else None
        if swap is not None:
            families[swap] = families[0]
        families[0] = PREFIX_CODE
    ids = [_distinct(rng, family, len(names)) for family in families]
    levels: list[dict[str, Link]] = []
    for level, entity in enumerate(domain.chain):
        facts = _distinct(rng, functools.partial(_fact, entity.fact_kind), len(names))
        nexts: list[str | None] = (
            list(ids[level + 1]) if level + 1 < len(domain.chain) else [None] * len(names)
        )
        levels.append({i: Link(i, f, n) for i, f, n in zip(ids[level], facts, nexts, strict=True)})
    days = dict(
        zip(
            _distinct(rng, iso_date, 3),
            _distinct(rng, functools.partial(_fact, domain.dated.fact_kind), 3),
            strict=True,
        )
    )
    zone_values = dict(
        zip(
            domain.zones.choices,
            _distinct(
                rng, functools.partial(_fact, domain.zones.fact_kind), len(domain.zones.choices)
            ),
            strict=True,
        )
    )
    record_family = rng.choice(ID_FAMILIES)
    record_ids = _distinct(rng, record_family, 7)
    rec = domain.record
    holders = _distinct(rng, person_name, 4)
    records = {
        rid: {
            "holder": holder,
            rec.category: rng.choice(rec.categories),
            rec.integer: rng.randrange(1, 40),
            rec.number: rng.randrange(100, 90000) / 100,
            rec.boolean: rng.random() < 0.5,
            "contact": {"email": f"{holder.split()[0].lower()}@{domain.key}.example"},
            "tags": [],
        }
        for rid, holder in zip(record_ids[:4], holders, strict=True)
    }
    return World(
        domain=domain,
        style=pick_style(rng),
        names=names,
        by_name={n: i for n, i in zip(names, ids[0], strict=True)},
        levels=tuple(levels),
        families=tuple(families),
        # A lower-case code must reach the tool (whose error says what is wrong), not be
        # refused by the schema's pattern first.
        patterns=tuple(rng.random() < 0.5 and not (code_ids and i == 0) for i in range(4)),
        days=days,
        zone_values=zone_values,
        records=records,
        record_family=record_family,
        new_ids=tuple(record_ids[4:]),
        errors={
            "format": rng.choice(_FORMAT_ERRORS),
            "missing": rng.choice(_NOT_FOUND_ERRORS),
            "name": rng.choice(_NAME_ERRORS),
            "choice": rng.choice(_CHOICE_ERRORS),
            "date": rng.choice(_DATE_ERRORS),
        },
        outage=rng.choice(_OUTAGES),
    )

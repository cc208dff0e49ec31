"""The six shapes of generated case: what each asks, which tools it needs, how it is judged.

Each builder takes the case's RNG and a :class:`~forge_rt.eval.generated._world.World` and
returns a :class:`Draft`: plain data (turns, tool plans, the perfect model's plan per turn)
plus a judge over a run's :class:`~forge_rt.eval.generated._tools.RunState`. Nothing here
holds run state; :mod:`forge_rt.eval.generated._build` makes a fresh state per run.

``chain``     2-4 lookups, each on an id the previous one returned; judged on the last fact.
``fanout``    one lookup per item the request names (2-4); judged on every item's fact.
``recovery``  the first call fails (bad format, unknown choice, or an outage) and the model
              retries right; judged on the fact the successful call returned.
``decline``   nothing fits: answer with ``respond`` alone; judged on calling no domain tool.
``followup``  two turns, the second about the first's result; judged on the second's fact.
``stateful``  create, update or delete a record; judged on the end state and the answer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from forge_rt.backends.sim import Intent
from forge_rt.eval._scenario import Verdict
from forge_rt.eval.generated._tools import RunState
from forge_rt.eval.generated._values import long_date, person_name
from forge_rt.eval.generated._world import World
from forge_rt.eval.scenarios._kit import call, contains_all

__all__ = ["BUILDERS", "SHAPES", "Draft"]

StateJudge = Callable[[RunState, str], Verdict]


@dataclass(frozen=True)
class Draft:
    """A generated case before it is a Scenario (see the module docstring).

    ``needed``: the tools a perfect run calls; ``required``: the workflow's required steps;
    ``plans``: the perfect model's steps per user turn (for ``plan_oracle``); ``first_tries``:
    per tool, the arguments a perfect model sends first, before the tool's error tells it
    better; ``outages``: per tool, how many calls fail before one succeeds;
    ``ideal_calls``: every call of a perfect run, failed first tries and answers included.
    """

    shape: str
    features: tuple[str, ...]
    description: str
    turns: tuple[str, ...]
    needed: tuple[str, ...]
    plans: tuple[tuple[Intent, ...], ...]
    judge: StateJudge
    ideal_calls: int
    required: tuple[str, ...] = ()
    first_tries: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    outages: Mapping[str, int] = field(default_factory=dict)


def _respond(message: str) -> Intent:
    return call("respond", message=message)


def _answer_judge(*facts: str) -> StateJudge:
    """Correct when the answer mentions every fact (case- and punctuation-insensitive)."""
    check = contains_all(*facts)
    return lambda state, output: check(output)


def _listed(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


# --- chain ---------------------------------------------------------------------------------


def _chain(rng: random.Random, world: World) -> Draft:
    depth = rng.randint(2, 4)
    name = rng.choice(world.names)
    links = world.path(name, depth)
    chain = world.domain.chain
    phrase = f"{chain[0].noun} {name}"
    for entity in chain[1:depth]:
        phrase = f"the {entity.noun} of {phrase}"
    fact = chain[depth - 1].fact
    template = rng.choice(
        (
            "What is the {fact} of {phrase}?",
            "Can you tell me the {fact} of {phrase}?",
            "I need the {fact} of {phrase}, please.",
            "Look up the {fact} of {phrase} for me.",
        )
    )
    steps: list[Intent] = [call(world.find_tool, name=name)]
    for level in range(1, depth):
        steps.append(call(world.lookup_tool(level), **{world.id_field(level): links[level].id}))
    answer = links[-1].fact
    steps.append(_respond(f"The {fact} of {phrase} is {answer}."))
    needed = (world.find_tool, *(world.lookup_tool(level) for level in range(1, depth)))
    return Draft(
        shape="chain",
        features=(f"depth-{depth}",),
        description=f"{depth} dependent lookups in {world.domain.title}",
        turns=(template.format(fact=fact, phrase=phrase),),
        needed=needed,
        plans=(tuple(steps),),
        judge=_answer_judge(answer),
        ideal_calls=depth + 1,
        required=needed,
    )


# --- fanout --------------------------------------------------------------------------------

_NUMERIC = frozenset({"count", "decimal", "percent"})


def _plural(noun: str) -> str:
    """``seed batch`` -> ``seed batches``, ``van`` -> ``vans``."""
    return noun + ("es" if noun.endswith(("s", "x", "ch", "sh")) else "s")


def _number(text: str) -> float:
    return float(re.sub(r"[^\d.]", "", text))


def _fanout(rng: random.Random, world: World) -> Draft:
    width = rng.randint(2, 4)
    names = rng.sample(world.names, width)
    entity = world.domain.chain[0]
    facts = [world.levels[0][world.by_name[n]].fact for n in names]
    compare = entity.fact_kind in _NUMERIC and rng.random() < 0.5
    listed = _listed(names)
    if compare:
        template = rng.choice(
            (
                "Which of these {noun} has the highest {fact}: {listed}? Give me each value too.",
                "Compare the {fact} of {listed} and tell me which is highest.",
            )
        )
    else:
        template = rng.choice(
            (
                "What is the {fact} of each of these {noun}: {listed}?",
                "Give me the {fact} for {listed}.",
                "I need the {fact} of {listed}.",
            )
        )
    request = template.format(noun=_plural(entity.noun), fact=entity.fact, listed=listed)
    answer = "; ".join(f"{n}: {f}" for n, f in zip(names, facts, strict=True))
    expected = list(facts)
    if compare:
        top = max(zip(names, facts, strict=True), key=lambda pair: _number(pair[1]))[0]
        answer += f". The highest is {top}."
        expected.append(top)
    steps: list[Intent] = [call(world.find_tool, name=n) for n in names]
    steps.append(_respond(answer))
    return Draft(
        shape="fanout",
        features=(f"width-{width}", *(("compare",) if compare else ())),
        description=f"the same lookup for {width} named {_plural(entity.noun)}, then one answer",
        turns=(request,),
        needed=(world.find_tool,),
        plans=(tuple(steps),),
        judge=_answer_judge(*expected),
        ideal_calls=width + 1,
        required=(world.find_tool,),
    )


# --- recovery ------------------------------------------------------------------------------


def _recovery(rng: random.Random, world: World) -> Draft:
    kind = rng.choice(("format", "date", "choice", "outage"))
    if kind == "format":
        name = rng.choice(world.names)
        code = world.by_name[name]
        link = world.levels[0][code]
        fact = world.domain.chain[0].fact
        tool, field_name = world.lookup_tool(0), world.id_field(0)
        request = rng.choice(
            (
                "What is the {fact} of {noun} {code}?",
                "Please check {noun} {code} and tell me its {fact}.",
                "{noun} {code}: what's the {fact}?",
            )
        ).format(fact=fact, noun=world.noun(0), code=code.lower())
        good, first = {field_name: code}, {field_name: code.lower()}
        answer = link.fact
        message = f"The {fact} of {world.noun(0)} {code} is {answer}."
    elif kind == "date":
        dated = world.domain.dated
        day = rng.choice(sorted(world.days))
        tool, answer = dated.tool, world.days[day]
        request = rng.choice(
            (
                "What was the {fact} on {day}?",
                "How did {what} look on {day}? I need the {fact}.",
                "Tell me the {fact} for {day}.",
            )
        ).format(fact=dated.fact, what=dated.what, day=long_date(day))
        good, first = {"date": day}, {"date": long_date(day)}
        message = f"On {day} the {dated.fact} was {answer}."
    elif kind == "choice":
        zones = world.domain.zones
        zone = rng.choice(zones.choices)
        spoken = zone.replace("-", " ").title()
        tool, answer = zones.tool, world.zone_values[zone]
        request = rng.choice(
            (
                "What's the {fact} in the {spoken} {param} right now?",
                "Check the {fact} of {spoken}, please.",
                "How is {spoken} doing? I need its {fact}.",
            )
        ).format(fact=zones.fact, spoken=spoken, param=zones.param.replace("_", " "))
        good, first = {zones.param: zone}, {zones.param: spoken}
        message = f"The {zones.fact} of {spoken} ({zone}) is {answer}."
    else:
        name = rng.choice(world.names)
        link = world.levels[0][world.by_name[name]]
        fact = world.domain.chain[0].fact
        tool, answer = world.find_tool, link.fact
        request = rng.choice(
            (
                "What is the {fact} of {name}?",
                "Look up {name} and give me the {fact}.",
            )
        ).format(fact=fact, name=name)
        good, first = {"name": name}, {}
        message = f"The {fact} of {name} is {answer}."
    return Draft(
        shape="recovery",
        features=(f"error-{kind}",),
        description=f"{tool} fails once ({kind}); the retry must fix it",
        turns=(request,),
        needed=(tool,),
        plans=((call(tool, **good), _respond(message)),),
        judge=_answer_judge(answer),
        ideal_calls=3,
        required=(tool,),
        first_tries={tool: first} if first else {},
        outages={tool: 1} if kind == "outage" else {},
    )


# --- decline -------------------------------------------------------------------------------

_DECLINES = (
    ("Write me a two-line poem about autumn leaves.", "Leaves of amber drift and fall, / autumn whispers to us all."),
    ("Can you recommend a good film for tonight?", "I can't look films up here, but a classic comedy is a safe choice."),
    ("What's a polite way to decline a wedding invitation?", "Thank the couple warmly, say you cannot attend, and wish them well."),
    ("Translate 'see you tomorrow' into Portuguese.", "'See you tomorrow' in Portuguese is 'até amanhã'."),
    ("Book me a table at an Italian restaurant tonight.", "I can't book restaurants with the tools I have here, sorry."),
    ("Tell me a short joke about penguins.", "Why don't penguins fly? They're not tall enough to be pilots."),
    ("Explain in one sentence what photosynthesis is.", "Photosynthesis is how plants turn light, water and carbon dioxide into sugar and oxygen."),
    ("Please order me a taxi to the train station.", "I have no tool that can order a taxi, sorry."),
)  # fmt: skip


def _decline(rng: random.Random, world: World) -> Draft:
    request, reply = rng.choice(_DECLINES)

    def judge(state: RunState, output: str) -> Verdict:
        if state.calls:
            names = sorted({name for name, _ in state.calls})
            return Verdict(False, f"no tool fits the request, but it called {names}")
        if not output.strip():
            return Verdict(False, "the answer is empty")
        return Verdict(True)

    return Draft(
        shape="decline",
        features=("no-tool",),
        description="no tool fits the request: answer without calling one",
        turns=(request,),
        needed=(),
        plans=((_respond(reply),),),
        judge=judge,
        ideal_calls=1,
    )


# --- followup ------------------------------------------------------------------------------


def _followup(rng: random.Random, world: World) -> Draft:
    first, other = rng.sample(world.names, 2)
    chain = world.domain.chain
    link = world.levels[0][world.by_name[first]]
    opening = rng.choice(
        (
            "What is the {fact} of {noun} {name}?",
            "Could you find the {fact} of {name}?",
        )
    ).format(fact=chain[0].fact, noun=chain[0].noun, name=first)
    needed: tuple[str, ...]
    turn1 = (
        call(world.find_tool, name=first),
        _respond(f"The {chain[0].fact} of {first} is {link.fact}."),
    )
    if rng.random() < 0.5:
        again = world.levels[0][world.by_name[other]]
        follow = rng.choice(
            (
                "And what about {name}?",
                "Same question for the other one, {name}.",
                "How about {name}?",
            )
        ).format(name=other)
        turn2 = (
            call(world.find_tool, name=other),
            _respond(f"The {chain[0].fact} of {other} is {again.fact}."),
        )
        answer, needed, variant = again.fact, (world.find_tool,), "new-item"
    else:
        assert link.next_id is not None
        nxt = world.levels[1][link.next_id]
        follow = rng.choice(
            (
                "And what is the {fact} of its {noun}?",
                "Thanks. What's the {fact} of that {noun}'s {noun1}?",
            )
        ).format(fact=chain[1].fact, noun=chain[1].noun, noun1=chain[1].noun)
        follow = follow.replace(
            f"that {chain[1].noun}'s {chain[1].noun}", f"{first}'s {chain[1].noun}"
        )
        turn2 = (
            call(world.lookup_tool(1), **{world.id_field(1): nxt.id}),
            _respond(f"The {chain[1].fact} of the {chain[1].noun} is {nxt.fact}."),
        )
        answer, needed, variant = nxt.fact, (world.find_tool, world.lookup_tool(1)), "next-hop"
    return Draft(
        shape="followup",
        features=(variant,),
        description="a second turn that refers back to the first turn's result",
        turns=(opening, follow),
        needed=needed,
        plans=(turn1, turn2),
        judge=_answer_judge(answer),
        ideal_calls=4,
        required=(world.find_tool,),
    )


# --- stateful ------------------------------------------------------------------------------


def _unchanged(state: RunState, world: World, keep: Sequence[str]) -> str | None:
    """Why the records ``keep`` differ from how the run started, or None."""
    for rid in keep:
        if state.records.get(rid) != world.records[rid]:
            return f"{rid} should be untouched, is {state.records.get(rid)}"
    return None


def _stateful(rng: random.Random, world: World) -> Draft:
    verb = rng.choice(("create", "update", "delete"))
    rec = world.domain.record
    noun = rec.noun
    listing = call(world.record_tool("list"))
    if verb == "create":
        holder = person_name(rng)
        while holder in {r["holder"] for r in world.records.values()}:
            holder = person_name(rng)
        email = f"{holder.replace(' ', '.').lower()}@{world.domain.key}.example"
        values: dict[str, Any] = {
            rec.category: rng.choice(rec.categories),
            rec.integer: rng.randrange(2, 30),
            rec.number: rng.randrange(1000, 50000) / 100,
            rec.boolean: rng.random() < 0.5,
        }
        tags = rng.sample(["new", "priority", "audit", "follow-up", "vip"], 2)
        words = {k: k.replace("_", " ").capitalize() for k in values}
        shown = {
            rec.category: values[rec.category],
            rec.integer: values[rec.integer],
            rec.number: f"{values[rec.number]:.2f}",
            rec.boolean: "yes" if values[rec.boolean] else "no",
        }
        # One sentence per field: fields run together with commas read as a list of items.
        fields = " ".join(f"{words[k]}: {shown[k]}." for k in values)
        request = rng.choice(
            (
                "Please create a {noun} for {holder} ({email}). {fields} Tag it {tags}.",
                "New {noun} for {holder}, email {email}. {fields} Tags: {tags}.",
            )
        ).format(noun=noun, holder=holder, email=email, fields=fields, tags=" and ".join(tags))
        new_id = world.new_ids[0]
        args = {"holder": holder, **values, "contact": {"email": email}, "tags": tags}
        steps: tuple[Intent, ...] = (
            call(world.record_tool("create"), **args),
            _respond(f"Created {noun} {new_id} for {holder}."),
        )
        expected = {
            "holder": holder,
            **values,
            "contact": {"email": email},
            "tags": tags,
        }

        def judge_create(state: RunState, output: str) -> Verdict:
            fault = _unchanged(state, world, list(world.records))
            new = {k: v for k, v in state.records.items() if k not in world.records}
            if fault is None and list(new) != [new_id]:
                fault = f"expected exactly one new {noun}, got {sorted(new)}"
            if fault is None and _fold(new[new_id]) != _fold(expected):
                fault = f"{new_id} is {new[new_id]}, expected {expected}"
            if fault is None and not contains_all(new_id)(output).correct:
                fault = f"the answer does not give the new id {new_id}"
            return Verdict(fault is None, fault or "")

        return _stateful_draft(
            verb, world, request, steps, judge_create, ("nested", "array", "enum")
        )
    rid = rng.choice(sorted(world.records))
    holder = world.records[rid]["holder"]
    others = [r for r in world.records if r != rid]
    if verb == "delete":
        request = rng.choice(
            (
                "Please delete the {noun} for {holder}; it was entered by mistake.",
                "Remove {holder}'s {noun}.",
            )
        ).format(noun=noun, holder=holder)
        steps = (
            listing,
            call(world.record_tool("delete"), **{world.record_id_field: rid}),
            _respond(f"Deleted {holder}'s {noun} ({rid})."),
        )

        def judge_delete(state: RunState, output: str) -> Verdict:
            fault = _unchanged(state, world, others)
            if fault is None and (rid in state.records or len(state.records) != len(others)):
                fault = f"expected only {rid} deleted, records now {sorted(state.records)}"
            if fault is None and not _mentions_any(output, rid, holder):
                fault = f"the answer names neither {rid} nor {holder}"
            return Verdict(fault is None, fault or "")

        return _stateful_draft(verb, world, request, steps, judge_delete, ())
    field_name = rng.choice((rec.category, rec.integer, rec.number, rec.boolean))
    old = world.records[rid][field_name]
    new_value: Any
    if field_name == rec.category:
        new_value = rng.choice([c for c in rec.categories if c != old])
        said, feature = str(new_value), "enum"
    elif field_name == rec.integer:
        new_value = old + rng.randrange(1, 9)
        said, feature = str(new_value), "integer"
    elif field_name == rec.number:
        new_value = round(old + rng.randrange(100, 5000) / 100, 2)
        said, feature = f"{new_value:.2f}", "number"
    else:
        new_value = not old
        said, feature = ("yes" if new_value else "no"), "boolean"
    request = rng.choice(
        (
            "Set the {field} on {holder}'s {noun} to {value}.",
            "{holder}'s {noun} needs its {field} changed to {value}.",
        )
    ).format(field=field_name.replace("_", " "), holder=holder, noun=noun, value=said)
    steps = (
        listing,
        call(
            world.record_tool("update"),
            **{world.record_id_field: rid, "changes": {field_name: new_value}},
        ),
        _respond(
            f"Updated {holder}'s {noun} ({rid}): {field_name.replace('_', ' ')} is now {said}."
        ),
    )
    expected_record = {**world.records[rid], field_name: new_value}

    def judge_update(state: RunState, output: str) -> Verdict:
        fault = _unchanged(state, world, others)
        if fault is None and _fold(state.records.get(rid)) != _fold(expected_record):
            fault = f"{rid} is {state.records.get(rid)}, expected {expected_record}"
        if fault is None and not _mentions_any(output, rid, holder):
            fault = f"the answer names neither {rid} nor {holder}"
        return Verdict(fault is None, fault or "")

    return _stateful_draft(verb, world, request, steps, judge_update, ("nested", feature))


def _fold(value: Any) -> Any:
    """A record compared loosely: strings case-folded and stripped, numbers as floats, lists
    as sorted lists (tag order is no fact)."""
    if isinstance(value, dict):
        return {k: _fold(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted(_fold(v) for v in value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    return str(value).strip().casefold()


def _mentions_any(output: str, *facts: str) -> bool:
    return any(contains_all(f)(output).correct for f in facts)


def _stateful_draft(
    verb: str,
    world: World,
    request: str,
    steps: tuple[Intent, ...],
    judge: StateJudge,
    features: tuple[str, ...],
) -> Draft:
    tools = tuple(s.name for s in steps if not isinstance(s, str) and s.name != "respond")
    return Draft(
        shape="stateful",
        features=(verb, *features),
        description=f"{verb} a {world.domain.record.noun}; judged on the end state",
        turns=(request,),
        needed=tools,
        plans=(steps,),
        judge=judge,
        ideal_calls=len(steps),
        required=tools,
    )


SHAPES = ("chain", "fanout", "recovery", "decline", "followup", "stateful")
"""Every shape, in the order a block of cases cycles through before it is shuffled."""

BUILDERS: dict[str, Callable[[random.Random, World], Draft]] = {
    "chain": _chain,
    "fanout": _fanout,
    "recovery": _recovery,
    "decline": _decline,
    "followup": _followup,
    "stateful": _stateful,
}

"""BFCL's cases as the eval runs them: its questions and functions, tools a client can send.

The data are the installed ``bfcl-eval``'s own files (one JSON object a line), read as they
are; the ground truth comes from its ``possible_answer`` folder. Two things are translated for
the wire and back, never for scoring:

- **Names.** BFCL names functions ``math.sum`` or ``spotify.play``; OpenAI-style tool names
  allow only ``[A-Za-z0-9_-]``. Every other character becomes ``_`` (a clash gets a number), and
  the case keeps the map back, so the checker sees the names BFCL wrote.
- **Types.** BFCL's parameter types (``dict``, ``float``, ``tuple``, ``any``) become JSON Schema
  types by BFCL's own table (``GORILLA_TO_OPENAPI``), at every depth.

Sampling is by the dev/test split first (:mod:`forge_rt.eval._split`, on the case id), then a
seeded order within each category, so a sample of 40 is the first 40 of a sample of 80.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from forge_rt.eval._split import SplitName, in_split
from forge_rt.eval.bfcl._package import checkers, data_dir

__all__ = [
    "CATEGORIES",
    "MULTI_TURN",
    "SINGLE_TURN",
    "BfclCase",
    "Category",
    "load_category",
    "sample_cases",
    "tool_name",
]

CheckKind = Literal["ast", "irrelevance", "relevance", "multi_turn"]


class Category(msgspec.Struct, frozen=True):
    """One BFCL category: its data file's stem and how BFCL checks it."""

    name: str
    stem: str
    check: CheckKind


CATEGORIES: dict[str, Category] = {
    c.name: c
    for c in (
        Category("simple", "simple_python", "ast"),
        Category("multiple", "multiple", "ast"),
        Category("parallel", "parallel", "ast"),
        Category("parallel_multiple", "parallel_multiple", "ast"),
        Category("irrelevance", "irrelevance", "irrelevance"),
        Category("live_simple", "live_simple", "ast"),
        Category("live_multiple", "live_multiple", "ast"),
        Category("live_parallel", "live_parallel", "ast"),
        Category("live_parallel_multiple", "live_parallel_multiple", "ast"),
        Category("live_irrelevance", "live_irrelevance", "irrelevance"),
        Category("live_relevance", "live_relevance", "relevance"),
        Category("multi_turn_base", "multi_turn_base", "multi_turn"),
    )
}

SINGLE_TURN: tuple[str, ...] = (
    "simple",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
)
"""The five non-live single-turn categories: the default selection."""

MULTI_TURN: tuple[str, ...] = ("multi_turn_base",)

_FILE_PREFIX = "BFCL_v4_"
_VALID_NAME = re.compile(r"[^A-Za-z0-9_-]")
# JSON Schema keywords a BFCL parameter may carry that mean the same in JSON Schema; BFCL's own
# extras (``optional``) are dropped.
_KEPT_KEYWORDS = ("description", "enum", "default", "minimum", "maximum", "pattern", "format")


class BfclCase(msgspec.Struct, frozen=True, kw_only=True):
    """One BFCL case, ready to send.

    ``turns``: the user turns, each a list of chat messages (single-turn cases have one);
    ``tools``: OpenAI-style tool definitions under wire-safe names; ``names``: wire name ->
    BFCL name; ``functions``: BFCL's function documents as its checker reads them;
    ``ground_truth``: the ``possible_answer`` entry (none for relevance categories);
    ``initial_config`` and ``involved_classes``: the executable API state of multi-turn cases.
    """

    id: str
    category: str
    turns: tuple[tuple[dict[str, Any], ...], ...]
    functions: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    names: dict[str, str]
    ground_truth: Any = None
    initial_config: dict[str, Any] = msgspec.field(default_factory=dict)
    involved_classes: tuple[str, ...] = ()

    @property
    def check(self) -> CheckKind:
        return CATEGORIES[self.category].check


def tool_name(bfcl_name: str, taken: Iterable[str] = ()) -> str:
    """A wire-safe tool name for ``bfcl_name``, different from every name in ``taken``."""
    base = _VALID_NAME.sub("_", bfcl_name)[:60] or "function"
    used = set(taken)
    name, n = base, 2
    while name in used:
        name, n = f"{base}_{n}", n + 1
    return name


def _json_schema(spec: dict[str, Any], types: dict[str, str]) -> dict[str, Any]:
    """A BFCL parameter description as JSON Schema, recursively."""
    out: dict[str, Any] = {k: spec[k] for k in _KEPT_KEYWORDS if k in spec}
    kind = spec.get("type")
    if kind is not None:
        if kind not in types:
            raise ValueError(f"BFCL type {kind!r} has no JSON Schema type in BFCL's table")
        out["type"] = types[kind]
    if "properties" in spec:
        out["properties"] = {
            key: _json_schema(value, types) for key, value in spec["properties"].items()
        }
    if "required" in spec:
        out["required"] = list(spec["required"])
    if "items" in spec:
        out["items"] = _json_schema(spec["items"], types)
    return out


def _tools(
    functions: Sequence[dict[str, Any]],
) -> tuple[tuple[dict[str, Any], ...], dict[str, str]]:
    types = checkers().type_mapping
    names: dict[str, str] = {}
    tools: list[dict[str, Any]] = []
    for function in functions:
        wire = tool_name(function["name"], names)
        names[wire] = function["name"]
        parameters = _json_schema(function.get("parameters", {"type": "dict"}), types)
        parameters["type"] = "object"
        parameters.setdefault("properties", {})
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": wire,
                    "description": function.get("description", ""),
                    "parameters": parameters,
                },
            }
        )
    return tuple(tools), names


def _lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as source:
        return [json.loads(line) for line in source if line.strip()]


def _multi_turn_functions(classes: Sequence[str]) -> list[dict[str, Any]]:
    files = checkers().func_doc_files
    folder = data_dir() / "multi_turn_func_doc"
    return [doc for name in classes for doc in _lines(folder / files[name])]


def load_category(name: str) -> list[BfclCase]:
    """Every case of BFCL category ``name``, in the file's order."""
    if name not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {name!r}; choose from {list(CATEGORIES)}")
    category = CATEGORIES[name]
    folder = data_dir()
    entries = _lines(folder / f"{_FILE_PREFIX}{category.stem}.json")
    answers_path = folder / "possible_answer" / f"{_FILE_PREFIX}{category.stem}.json"
    answers = (
        {a["id"]: a["ground_truth"] for a in _lines(answers_path)} if answers_path.exists() else {}
    )
    cases: list[BfclCase] = []
    for entry in entries:
        classes = tuple(entry.get("involved_classes", ()))
        functions = entry["function"] if "function" in entry else _multi_turn_functions(classes)
        tools, names = _tools(functions)
        if category.check in ("ast", "multi_turn") and entry["id"] not in answers:
            raise ValueError(f"BFCL case {entry['id']!r} has no ground truth in {answers_path}")
        cases.append(
            BfclCase(
                id=entry["id"],
                category=name,
                turns=tuple(tuple(turn) for turn in entry["question"]),
                functions=tuple(functions),
                tools=tools,
                names=names,
                ground_truth=answers.get(entry["id"]),
                initial_config=entry.get("initial_config", {}),
                involved_classes=classes,
            )
        )
    return cases


def _order(seed: int, case_id: str) -> bytes:
    return hashlib.sha256(f"{seed}:{case_id}".encode()).digest()


def sample_cases(
    categories: Sequence[str], per_category: int | None, *, split: SplitName, seed: int = 0
) -> list[BfclCase]:
    """Up to ``per_category`` cases of each category in ``split`` (all with ``None``), drawn
    in a seeded order that does not depend on how many are drawn."""
    chosen: list[BfclCase] = []
    for name in dict.fromkeys(categories):
        cases = [c for c in load_category(name) if in_split(c.id, split)]
        cases.sort(key=lambda c: _order(seed, c.id))
        chosen.extend(cases if per_category is None else cases[:per_category])
    return chosen

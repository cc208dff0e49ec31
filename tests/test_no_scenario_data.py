"""No library module or rule test names data from an eval scenario: rules read structure, not
our test cases.

A comment that explains a guardrail with "Oslo or Cairo" was written with the eval's question in
view, and code that holds such a value passes the eval by knowing its answer. Library text uses
invented values of the same shape instead ("Turku or Lima"). This test reads the scenario modules
(``forge_rt/eval/scenarios``) with :mod:`ast`, collects their distinctive values and fails for
each one that a library module (code, comment or docstring) names as a whole word, naming the
file and the values.

A value is taken from the scenarios' string constants (docstrings and ``__all__`` left out):

- an id or reading: a token of letters and digits joined by ``-`` or ``.`` that holds both a
  letter and a digit, three characters or more (``ORD-0042``, ``A-1``, ``u-7f3a9``, ``24C``,
  ``5pm``, ``hunter2``);
- a figure: a number of four digits or more, or one written with a separator (``.``, ``,``,
  ``:``, ``-``) that holds three digits or more (``7319``, ``412.30``, ``467,000``, ``14:05``,
  ``2026-12-03``); short plain numbers (``42``, ``0.5``) are everyone's;
- a path or an address: a token that starts with ``/`` or holds an ``@``
  (``/notes/todo.txt``, ``grace.hopper@navy.example``);
- a name: a capitalised word of three letters or more that stands where English capitalises
  only names -- after a space or ``(`` that ends no sentence (not after ``.``, ``!``, ``?`` or
  ``:``), as in "weather in Paris" or "Who manages Sarah Chen's department?" -- or in a string
  of capitalised words alone (``"Cairo"``, ``"Grace Hopper"``). So "What", "Please" or "Weather"
  opening a sentence are not names, while "Oslo or Cairo" gives both. The ISO codes the scenarios
  use (``UTC``, ``CET``, ``EUR``, ``USD``) are standard vocabulary, not data, and are skipped;
- a tool, parameter or scenario name: a whole string in ``snake_case`` (``get_exchange_rate``,
  ``todo_id``, ``currency_chain``). A rule explained with the scenario's own tool was written
  with that scenario in view. The parameter names every API shares (``user_id``, ``order_id``,
  ``from_unit``, ``to_unit``) are vocabulary, not data.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "forge_rt" / "eval" / "scenarios"
LIBRARY = [
    ROOT / "forge_rt" / name
    for name in ("guardrails", "proxy", "runtime", "core", "clients", "wire", "context", "store")
] + [ROOT / "forge_rt" / "trace", ROOT / "actors"]

# Standard codes (ISO 4217 currencies, time zones): vocabulary every API example shares.
STANDARD = {"UTC", "CET", "EUR", "USD"}
# Parameter names every API with users, orders or units spells the same way.
SHARED_NAMES = {"user_id", "order_id", "from_unit", "to_unit"}

_TOKEN = re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*")
_DOTTED = re.compile(r"[A-Za-z0-9]+(?:[-.][A-Za-z0-9]+)*")
_FIGURE = re.compile(r"(?<![\w.,:-])\d+(?:[.,:-]\d+)*(?![\w]|[.,:-]\d)")
_ADDRESS = re.compile(r"[\w./@-]*[/@][\w./@-]*[\w]")
_MID_SENTENCE_NAME = re.compile(r"(?<![.!?:] )(?<=[ (])[A-Z][A-Za-z]{2,}\b")
_NAMES_ONLY = re.compile(r"[A-Z][A-Za-z]{2,}(?: [A-Z][A-Za-z]{2,})*")
_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _all_lists(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            found.update(id(n) for n in ast.walk(node.value))
    return found


def scenario_strings() -> Iterator[str]:
    """Every string constant of the scenario modules (f-string pieces included)."""
    for path in sorted(SCENARIOS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree) | _all_lists(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in skip
            ):
                yield node.value


def distinctive(text: str) -> set[str]:
    """The ids, figures and names in one scenario string (see the module docstring)."""
    values: set[str] = set()
    for pattern in (_TOKEN, _DOTTED):
        for token in pattern.findall(text):
            has_letter = any(c.isalpha() for c in token)
            if has_letter and any(c.isdigit() for c in token) and len(token) >= 3:
                values.add(token)
    for figure in _FIGURE.findall(text):
        digits = sum(c.isdigit() for c in figure)
        if (figure.isdigit() and digits >= 4) or (not figure.isdigit() and digits >= 3):
            values.add(figure)
    for address in _ADDRESS.findall(text):
        if address.startswith("/") or "@" in address:
            values.add(address)
    values.update(_MID_SENTENCE_NAME.findall(text))
    if _NAMES_ONLY.fullmatch(text.strip()):
        values.update(text.split())
    if _SNAKE.fullmatch(text):
        values.add(text)
    return values - STANDARD - SHARED_NAMES


def scenario_values() -> set[str]:
    values: set[str] = set()
    for text in scenario_strings():
        values |= distinctive(text)
    return values


def _whole_word(*values: str) -> re.Pattern[str]:
    """Any of ``values`` as a whole word: not inside a longer word, id or number."""
    options = "|".join(re.escape(v) for v in sorted(values, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{options})(?![\w]|[-.,:]\w)")


def test_the_rule_picks_the_scenarios_values() -> None:
    """The collection finds the values the scenarios are known by and no sentence openers."""
    values = scenario_values()
    known = {"ORD-0042", "A-1", "u-7f3a9", "24C", "Oslo", "Cairo", "Sarah", "Chen", "7319"}
    known |= {"get_exchange_rate", "todo_id", "currency_chain"}
    assert known | {"/notes/plan.txt", "grace.hopper@navy.example"} <= values
    for word in ("What", "Please", "Weather", "Which", "UTC", "42", "user_id"):
        assert word not in values


def test_the_rule_reads_a_sentence() -> None:
    """Names mid-sentence are taken, sentence openers are not; ids and figures by their shape."""
    assert distinctive("Which is warmer, Lima or Turku? Ask Maren Holt.") == {
        "Lima",
        "Turku",
        "Maren",
        "Holt",
    }
    assert distinctive("use INV-0317 (k-9x) at 7pm; total 1,204.50 of 12") == {
        "INV-0317",
        "INV",
        "k-9x",
        "7pm",
        "1,204.50",
    }
    assert distinctive("Grace Hopper") == {"Grace", "Hopper"}
    assert distinctive("count_residents") == {"count_residents"}
    assert distinctive("call count_residents first") == set()
    assert distinctive("mail ilse@fleet.example or see /docs/roadmap.txt.") == {
        "ilse@fleet.example",
        "/docs/roadmap.txt",
    }
    assert _whole_word("A-1").search("ids A-1 and A-2")
    assert not _whole_word("A-1").search("A-12 or XA-1 or A-1x")


def test_no_library_module_names_scenario_data() -> None:
    """No library ``.py`` file names a scenario's id, figure or name as a whole word."""
    pattern = _whole_word(*scenario_values())
    found: list[str] = []
    for folder in LIBRARY:
        for path in sorted(folder.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            named = sorted({m.group() for m in pattern.finditer(text)})
            if named:
                found.append(f"{path.relative_to(ROOT)}: {', '.join(named)}")
    assert not found, "library modules name eval-scenario data:\n" + "\n".join(found)


# Rule tests invent their own names and values too: the guardrails' tests, and the runtime's that
# play a model against one rule. Exempt: the tests that replay verbatim real model replies (their
# text is what the model wrote) or run the real model on a task.
RULE_TESTS = ROOT / "tests" / "guardrails"
RUNTIME_RULE_TESTS = [
    ROOT / "tests" / "runtime" / name
    for name in (
        "test_answer_from_results.py",
        "test_last_chance.py",
        "test_loop_exclusion.py",
        "test_markup_exclusion.py",
    )
]
VERBATIM = {"test_rescue_real.py", "test_constrain_local_model.py", "test_exclude_local_model.py"}


def test_no_rule_test_names_scenario_data() -> None:
    """No guardrail rule test names a scenario's id, figure or name as a whole word."""
    pattern = _whole_word(*scenario_values())
    found: list[str] = []
    for path in sorted(RULE_TESTS.glob("*.py")) + RUNTIME_RULE_TESTS:
        if path.name in VERBATIM:
            continue
        named = sorted({m.group() for m in pattern.finditer(path.read_text(encoding="utf-8"))})
        if named:
            found.append(f"{path.relative_to(ROOT)}: {', '.join(named)}")
    assert not found, "rule tests name eval-scenario data:\n" + "\n".join(found)

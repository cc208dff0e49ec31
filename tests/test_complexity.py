"""No block of the guardrails is rated worse than C by radon's cyclomatic complexity.

The order a reply is judged in was once buried in a method of a dozen stages (rated E) coupled by
flags; a rule's logic reads best in small functions of one job. radon's ranks: A 1-5, B 6-10,
C 11-20, D 21-30, E 31-40, F 41+.
"""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_rank, cc_visit

GUARDRAILS = Path(__file__).resolve().parents[1] / "forge_rt" / "guardrails"
WORST = "C"


def test_no_guardrail_block_is_rated_worse_than_c() -> None:
    found = [
        f"{path.name}:{block.lineno} {block.fullname} {cc_rank(block.complexity)} "
        f"({block.complexity})"
        for path in sorted(GUARDRAILS.glob("*.py"))
        for block in cc_visit(path.read_text(encoding="utf-8"))
        if cc_rank(block.complexity) > WORST
    ]
    assert not found, "guardrail blocks rated worse than C:\n" + "\n".join(found)


def test_the_rank_check_bites() -> None:
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(25))
    (block,) = cc_visit(f"def f(x):\n{branches}\n    return -1\n")
    assert cc_rank(block.complexity) > WORST

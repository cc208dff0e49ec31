"""Every Python block in the README and docs/ is code that compiles, and the ones marked to run
do run.

A block that is a fragment of an async program says so on its first line (``# inside an async
function (trio)``) and is compiled as the body of one; any other block must compile as a module
(the README once showed ``async with`` at top level, a SyntaxError for whoever pasted it). A block
whose first line is ``# runs as is`` is run as a script, and must exit 0.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FRAGMENT = "# inside an async function (trio)"
RUNS = "# runs as is"
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in _BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return found


BLOCKS = _blocks()


def test_the_docs_have_python_blocks_to_check() -> None:
    assert len(BLOCKS) >= 15


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_every_python_block_compiles(where: str, code: str) -> None:
    if code.startswith(FRAGMENT):
        code = "async def _fragment():\n" + textwrap.indent(code, "    ")
    compile(code, where, "exec")  # a SyntaxError names the block's file and line


RUNNABLE = [(w, c) for w, c in BLOCKS if c.startswith(RUNS)]


@pytest.mark.parametrize(("where", "code"), RUNNABLE, ids=[w for w, _ in RUNNABLE])
def test_blocks_marked_to_run_run(where: str, code: str, tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(code)
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, f"{where}:\n{proc.stderr}"

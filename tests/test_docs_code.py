"""Every code block in the README and docs/ is run, parsed or checked -- none is only shown.

Each fenced block names its language, and each language has one check:

- ``python`` blocks say on their first line how they run. ``# runs as is`` is a whole program:
  it runs as a script and must exit 0, with ``http://127.0.0.1:8080`` (a model server) pointing at
  a simulated backend and ``http://127.0.0.1:8081`` (the proxy) at a proxy on it; one that names
  the embedded model on that line runs it for real (``slow``). ``# inside an async function
  (trio)`` is a fragment: it runs inside trio with the names ``tests/docs_scene.py`` provides
  (a ``client`` on the sim, workflows, tools). An unmarked Python block fails the test.
- ``console`` blocks are shell transcripts: each ``$ forge-rt ...`` command is parsed by the real
  CLI, so a renamed or retired flag in the docs fails here.
- ``toml`` is a policy file (loaded by ``Policy.loads``), ``json`` and ``yaml`` must parse,
  ``text`` is prose laid out (a file tree) and is not checked.

The README once showed ``async with`` at top level (a SyntaxError for whoever pasted it), a
snippet whose imports and workflow were missing and a port with no word on what served it; each
of those now fails a test.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import click
import pytest
import trio
import yaml
from docs_scene import open_scene

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.cli import main as forge_rt_cli
from forge_rt.guardrails import Policy
from forge_rt.proxy import BackendConfig, ProxyConfig, serve_proxy

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FRAGMENT = "# inside an async function (trio)"
RUNS = "# runs as is"
SLOW = "embedded model"
MODEL_SERVER = "http://127.0.0.1:8080"
PROXY = "http://127.0.0.1:8081"
LANGUAGES = {"python", "console", "toml", "json", "yaml", "text"}
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)


class Block:
    """One fenced block: where it is, its language and its text."""

    def __init__(self, where: str, language: str, code: str) -> None:
        self.where, self.language, self.code = where, language, code
        self.first_line = code.split("\n", 1)[0]

    def param(self) -> Any:
        marks = [pytest.mark.slow] if SLOW in self.first_line else []
        return pytest.param(self, id=self.where, marks=marks)


def _blocks() -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in _FENCE.finditer(text):
            line = text[: match.start()].count("\n") + 1
            where = f"{path.relative_to(ROOT)}:{line}"
            found.append(Block(where, match.group(1).strip(), match.group(2)))
    return found


BLOCKS = _blocks()


def _of(language: str, first_line: str | None = None) -> list[Any]:
    return [
        b.param()
        for b in BLOCKS
        if b.language == language and (first_line is None or b.first_line.startswith(first_line))
    ]


def test_the_docs_have_blocks_of_every_kind() -> None:
    languages = {b.language for b in BLOCKS}
    assert {"python", "console", "toml"} <= languages
    assert len(BLOCKS) >= 35


@pytest.mark.parametrize("block", [b.param() for b in BLOCKS])
def test_every_block_names_a_checked_language(block: Block) -> None:
    assert block.language in LANGUAGES, (
        f"{block.where}: a ```{block.language} block -- name one of {sorted(LANGUAGES)}"
    )
    if block.language == "python":
        assert block.first_line.startswith((RUNS, FRAGMENT)), (
            f"{block.where}: a Python block starts with {RUNS!r} or {FRAGMENT!r}"
        )


# --- python -----------------------------------------------------------------------------------


@asynccontextmanager
async def _servers() -> AsyncIterator[dict[str, str]]:
    """A sim (the model server the docs assume on :8080) and a proxy on it (theirs on :8081)."""
    async with SimBackend.serve(SimConfig(seed=1)) as sim:
        config = ProxyConfig(
            backend=BackendConfig(url=sim.url, kind="llamaserver"), port=0, graceful_timeout_s=0.5
        )
        async with serve_proxy(config) as proxy_url:
            yield {MODEL_SERVER: sim.url, PROXY: proxy_url}


@pytest.mark.parametrize("block", _of("python", RUNS))
async def test_programs_run(block: Block, tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    async with _servers() as urls:
        code = block.code
        for documented, served in urls.items():
            code = code.replace(documented, served)
        script.write_text(code)
        with trio.fail_after(600 if SLOW in block.first_line else 120):
            proc = await trio.run_process(
                [sys.executable, str(script)],
                cwd=tmp_path,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    assert proc.returncode == 0, f"{block.where}:\n{proc.stderr.decode()}"


@pytest.mark.parametrize("block", _of("python", FRAGMENT))
async def test_fragments_run_in_the_scene(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code = "async def _fragment():\n" + textwrap.indent(block.code, "    ")
    async with open_scene() as names:
        compiled = compile(code, block.where, "exec")  # a SyntaxError names file and line
        exec(compiled, names)
        with trio.fail_after(60):
            await names["_fragment"]()


# --- console ----------------------------------------------------------------------------------


def _commands(transcript: str) -> list[str]:
    """The ``$ `` command lines of a transcript, continuation lines joined, comments cut."""
    commands: list[str] = []
    pending = ""
    for line in transcript.splitlines():
        if pending:
            pending += " " + line.strip()
        elif line.startswith("$ "):
            pending = line[2:]
        else:
            continue  # output
        if pending.endswith("\\"):
            pending = pending[:-1]
        else:
            commands.append(pending)
            pending = ""
    return commands


def _parse(argv: list[str]) -> None:
    """Resolve the subcommand chain and parse every option, as running it would, then stop."""
    command: click.Command = forge_rt_cli
    context = command.make_context("forge-rt", argv, resilient_parsing=False)
    # The tokens after a group's options: the subcommand's name and its own. Click 8.2 deprecates
    # the public ``protected_args`` (9.0 moves them into ``args``); read both halves here.
    while isinstance(command, click.Group) and (
        tokens := [*context._protected_args, *context.args]
    ):
        name, found, rest = command.resolve_command(context, tokens)  # UsageError if unknown
        assert name is not None
        assert found is not None
        command = found
        context = command.make_context(name, rest, parent=context, resilient_parsing=False)


CONSOLE = [b for b in BLOCKS if b.language == "console"]
FORGE_COMMANDS = [
    pytest.param(command, id=f"{b.where} {command[:60]}")
    for b in CONSOLE
    for command in _commands(b.code)
    if command.startswith("forge-rt ")
]


@pytest.mark.parametrize("block", [b.param() for b in CONSOLE])
def test_transcripts_mark_their_commands(block: Block) -> None:
    assert _commands(block.code), f"{block.where}: a console block shows its commands as '$ ...'"


@pytest.mark.parametrize("command", FORGE_COMMANDS)
def test_transcript_commands_parse(command: str) -> None:
    argv = shlex.split(command, comments=True)[1:]
    try:
        _parse(argv)
    except click.BadParameter as error:
        # A path the user brings (their GGUF, their trace folder) need not exist here; any
        # other bad value is a docs error.
        missing = isinstance(error.param and error.param.type, click.Path)
        if not (missing and "does not exist" in error.format_message()):
            pytest.fail(f"`{command}`: {error.format_message()}")
    except click.UsageError as error:
        pytest.fail(f"`{command}`: {error.format_message()}")


def test_the_transcripts_have_forge_rt_commands_to_parse() -> None:
    assert len(FORGE_COMMANDS) >= 15


@pytest.mark.parametrize(
    "argv",
    [
        ["proxy", "--ctx-size", "4096"],  # retired spelling of --n-ctx
        ["eval", "--backend", "sim", "--no-such-flag"],
        ["eval", "report"],  # its results file is required
        ["no-such-command"],
    ],
)
def test_the_parse_refuses_what_the_cli_refuses(argv: list[str]) -> None:
    with pytest.raises(click.UsageError):
        _parse(argv)


# --- config -----------------------------------------------------------------------------------


@pytest.mark.parametrize("block", _of("toml"))
def test_toml_blocks_are_policies_that_load(block: Block) -> None:
    Policy.loads(block.code)


@pytest.mark.parametrize("block", _of("json"))
def test_json_blocks_parse(block: Block) -> None:
    json.loads(block.code)


@pytest.mark.parametrize("block", _of("yaml"))
def test_yaml_blocks_parse(block: Block) -> None:
    assert yaml.safe_load(block.code)

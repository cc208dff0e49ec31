"""Argument values that stand in for content instead of being it: placeholders and echoes.

A small model that cannot fill a field writes the *shape* of a value: a bracketed instruction
(``"[Your report here]."``), an angle-bracket slot (``"<city>"``), "Your message here",
``TODO``, the schema's own description of the field, or words from a correction it was just
sent. Each passes a ``string`` schema, so the validator refuses them with an error that says
which rule fired.

Every rule is written to leave real content alone (the tests hold both sides): JSON written as
a string, plain lists, markdown links and citations, HTML and generic types (``"<div>"``,
``"List<String>"``), "Your order is here.", and facts copied from a tool's result (only text the
guardrails wrote counts as an echo).
"""

from __future__ import annotations

import collections
import difflib
import itertools
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from forge_rt.core import ArgumentError

__all__ = [
    "ECHO_MARKUP",
    "EchoCorpus",
    "before_copied_note",
    "has_echo_markup",
    "normalise",
    "placeholder_errors",
    "prose",
    "strip_echo_markup",
]

# Chat-template markup a model echoes into argument values instead of real content.
ECHO_MARKUP = ("<tool_response", "</tool_response>", "<tool_call>", "</tool_call>")
# The markers our corrections open with (``[LoopError] ...``). A value that is a marker's name
# alone is an echo too (a model may answer "AnswerError" after an [AnswerError]).
_MARKER_NAMES = frozenset(
    {
        "AnswerError",
        "ArgumentError",
        "CoverageError",
        "LoopError",
        "NotExecuted",
        "PrereqError",
        "StepEnforcementError",
        "ToolError",
        "ToolResolutionError",
    }
)
# A marker, or the phrasing of insistent corrections, ours or another guardrail layer's
# ("Your next response MUST be a tool call").
_CORRECTION = re.compile(
    rf"\[(?:{'|'.join(sorted(_MARKER_NAMES))})\]|\byour next (?:reply|response|call) must\b",
    re.IGNORECASE,
)

# A value that is one bracket group, maybe followed by punctuation: "[Your report here]."
_WHOLE_BRACKET = re.compile(r"^\[([^\[\]]*)\][.!,;:]*$")
# A bracketed instruction inside a longer value ("Dear [Insert name], ..."); not a markdown link.
_INNER_BRACKET = re.compile(
    r"\[\s*(?:your|insert|enter|add|put|type|write|fill in|describe)\b[^\[\]]*\](?!\()",
    re.IGNORECASE,
)
# Words that make a bracketed phrase read as "put X here" rather than as content.
_SLOT_WORDS = frozenset(
    {
        "add",
        "address",
        "answer",
        "city",
        "content",
        "date",
        "description",
        "details",
        "email",
        "enter",
        "fill",
        "here",
        "id",
        "insert",
        "message",
        "name",
        "number",
        "placeholder",
        "put",
        "reply",
        "report",
        "response",
        "summary",
        "tbd",
        "text",
        "time",
        "title",
        "todo",
        "type",
        "value",
        "write",
        "your",
    }
)
_WHOLE_ANGLE = re.compile(r"^<\s*([A-Za-z][\w\- ]*?)\s*>[.!,;:]*$")
# Lower-case multi-word or snake_case slots (``<your name>``); not after a word (``vector<my_t>``).
_INNER_ANGLE = re.compile(r"(?<![\w:])<([a-z][a-z0-9]*(?:[_ \-][a-z0-9]+)+)>")
_ANGLE_WORD = re.compile(r"(?<![\w:])<([A-Za-z_]\w*)>")
# HTML elements: a value of just ``<div>`` is markup, not a slot.
_HTML_TAGS = frozenset(
    (  # noqa: SIM905 -- a word list reads best as words; a list literal would be 70 lines
        "a abbr address article aside b blockquote body br button caption code col dd del details "
        "div dl dt em footer form h1 h2 h3 h4 h5 h6 head header hr html i img input ins kbd label "
        "li main mark nav ol option p pre q s section select small span strong sub summary sup "
        "table tbody td textarea tfoot th thead tr u ul"
    ).split()
)
# "Your message here", "Insert your answer here", "Your answer goes here"; not "Your order is here".
_YOUR_HERE = re.compile(
    r"^(?:(?:please\s+)?(?:insert|enter|put|type|write|add|fill in|place)\s+)?your\s+"
    r"(?P<middle>(?:[\w'’\-]+\s+){0,6}?)(?:goes\s+)?here$",
    re.IGNORECASE,
)
_INSERT_HERE = re.compile(r"^(?:insert|enter|fill in)\s+.{1,60}?\s+here$", re.IGNORECASE)
_VERBS = frozenset({"is", "are", "was", "were", "has", "have", "had", "will", "can", "be", "am"})
_FILLERS = frozenset({"todo", "tbd", "fixme", "xxx", "placeholder", "...", "…"})
_EDGE = " \t\n[]<>.!,;:"
# A documentation path: "/path/to/your/file", "~/your_project/notes.txt". Its segments are the
# tell ("path" then "to", or one that starts with "your"), not "path" or "to" inside a name.
_PATH_SPLIT = re.compile(r"[/\\]+")
_TEMPLATE_SEGMENT = re.compile(
    r"^your(?:[_\-][a-z0-9]+)*$|^your(?:name|username|file|filename|project|folder|dir|path)$",
    re.IGNORECASE,
)

# How much text must match for a copy to count: blocks shorter than this are coincidence.
_MIN_BLOCK = 6
# A value shorter than this (normalised) is too short to call a copy ("Lyon", "Q3").
_MIN_COPY = 16
# Share of the value that must come from a correction for it to be an echo.
_ECHO_SHARE = 0.6
# The model's own values kept per text shown: a reply's calls carry several values each.
_OWN_PER_TEXT = 8
# Share of both the value and the description that must match for a copied description.
_DESCRIPTION_SHARE = 0.8
_MIN_DESCRIPTION = 10
_QUOTE = 80


def normalise(text: str) -> str:
    """``text`` folded for comparison: lower case, no quotes or backticks, single spaces."""
    folded = re.sub(r"[`\"'“”‘’*]", "", text.lower())
    return " ".join(folded.split()).strip(_EDGE)


def prose(text: str) -> str:
    """``text`` without its JSON objects: the example calls and argument echoes of a nudge are
    the model's own values (copying those is what a correction asks for), the rest is ours."""
    out: list[str] = []
    depth = 0
    for char in text:
        if char == "{":
            depth += 1
        elif char == "}" and depth:
            depth -= 1
        elif not depth:
            out.append(char)
    return "".join(out)


def _copied_from(a: str, b: str) -> set[int]:
    """The positions of ``a`` in blocks of at least ``_MIN_BLOCK`` characters found in ``b``,
    in order."""
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    blocks = (m for m in matcher.get_matching_blocks() if m.size >= _MIN_BLOCK)
    return {i for m in blocks for i in range(m.a, m.a + m.size)}


def _quote(text: str) -> str:
    short = text if len(text) <= _QUOTE else text[:_QUOTE] + "..."
    return json.dumps(short, ensure_ascii=False)


class EchoCorpus:
    """The corrections and notes the model was shown (the last ``limit``), without their JSON
    (the example calls carry the model's own values), for telling an echo from a value.
    ``known`` says whether a folded value is among the facts the model was given (a tool's
    result): that is never an echo, though a correction quoted it."""

    def __init__(self, limit: int = 32, known: Callable[[str], bool] | None = None) -> None:
        self._texts: collections.deque[str] = collections.deque(maxlen=limit)
        self._own: collections.deque[str] = collections.deque(maxlen=limit * _OWN_PER_TEXT)
        self._known = known

    def learn_own(self, args: Mapping[str, Any]) -> None:
        """The string values of a reply's call that copy no text shown so far: the model's own,
        so a correction that quotes one later does not make sending it again a copy."""
        for _path, _key, value in _strings(args, "$", None):
            folded = normalise(value)
            if len(folded) >= _MIN_COPY and folded not in self._own and not self.copies(folded):
                self._own.append(folded)

    def add(self, text: str) -> None:
        """Remember one text the model was shown."""
        folded = normalise(prose(text))
        if len(folded) >= _MIN_COPY and folded not in self._texts:
            self._texts.append(folded)

    def copies(self, folded: str) -> bool:
        """Whether ``folded`` (a :func:`normalise`-d value) is mostly text shown to the model.

        A character counts as copied where it lies in a block of at least ``_MIN_BLOCK``
        characters that one shown text holds too, and a shown text counts only where it gives
        ``_MIN_COPY`` such characters or more; the value is an echo once ``_ECHO_SHARE`` of it
        is copied, from one text or several (a small model splices corrections together).
        """
        if len(folded) < _MIN_COPY or (self._known is not None and self._known(folded)):
            return False
        if folded in self._own:
            return False
        copied: set[int] = set()
        for text in reversed(self._texts):
            found = _copied_from(folded, text)
            if len(found) >= _MIN_COPY:
                copied |= found
                if len(copied) >= _ECHO_SHARE * len(folded):
                    return True
        return False


def placeholder_errors(
    args: Mapping[str, Any],
    *,
    descriptions: Sequence[str],
    names: frozenset[str],
    echoes: EchoCorpus | None = None,
) -> list[ArgumentError]:
    """One error per string value in ``args`` (at any depth) that is not real content.
    ``descriptions``: the tool's own (:func:`normalise`-d), which a value must not copy;
    ``names``: every argument name of every tool (``<city>`` is a slot); ``echoes``: the
    corrections the model was shown."""
    found: list[ArgumentError] = []
    for path, key, value in _strings(args, "$", None):
        problem = _problem(value, key, descriptions, names, echoes)
        if problem is not None:
            found.append(ArgumentError(path, problem))
    return found


GUARDRAIL_TEXT_PROBLEM = (
    "Expected your own content, got the text of a correction copied back; write the real "
    "value, not the error message"
)


def marked_errors(
    args: Mapping[str, Any], markers: re.Pattern[str], *, answer: bool = False
) -> list[ArgumentError]:
    """One error per string value in ``args`` (at any depth) that holds text ``markers`` marks
    as the caller's corrections. An ``answer`` (the synthetic ``respond`` message) is refused
    only where nothing stands before the marker: the caller cuts the rest away."""
    found: list[ArgumentError] = []
    for path, _key, value in _strings(args, "$", None):
        marker = markers.search(value)
        if marker is None or (answer and value[: marker.start()].strip()):
            continue
        found.append(ArgumentError(path, GUARDRAIL_TEXT_PROBLEM))
    return found


_EDGE_MARKUP = re.compile(
    r"^\s*(?:</?tool_(?:response|call)>\s*)+|(?:\s*</?tool_(?:response|call)>)+\s*$"
)


# The notes forge_rt appends to a tool result ("\n[Note] ..."): a model that relays the result
# copies them along, on a new line or the same one; the result before is the answer.
_NOTE_TAIL = re.compile(r"\s*\[Note\] .*\Z", re.S)
# The same place in a reply's raw JSON text, where the line break is also JSON's escape.
_NOTE_IN_JSON = re.compile(r"(?:\\n|\s)*\[Note\] ")


def has_echo_markup(value: str) -> bool:
    """Whether ``value`` holds the chat template's tool-result or tool-call markup."""
    return any(mark in value for mark in ECHO_MARKUP)


def before_copied_note(raw: str) -> str | None:
    """A reply's raw JSON text cut where a string value goes on into a copied ``[Note]``, the
    string closed there (the lenient reader closes the brackets); ``None`` without one."""
    found = _NOTE_IN_JSON.search(raw)
    return None if found is None or found.start() == 0 else raw[: found.start()] + '"'


def strip_echo_markup(value: Any) -> Any:
    """``value`` with the chat template's result and call tags taken off the ends of strings
    (small models open an answer with the ``<tool_response>`` tag they saw) and a copied
    ``[Note]`` (see ``_NOTE_TAIL``) cut off the end. Markup inside a value, or a value that is
    nothing but markup, is left as it is, for the echo check to refuse."""
    if isinstance(value, str):
        stripped = _NOTE_TAIL.sub("", _EDGE_MARKUP.sub("", value))
        return stripped if stripped.strip() else value
    if isinstance(value, Mapping):
        return {k: strip_echo_markup(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_echo_markup(v) for v in value]
    return value


def _strings(value: Any, path: str, key: str | None) -> Iterator[tuple[str, str | None, str]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}", str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]", key)
    elif isinstance(value, str):
        yield path, key, value


def _problem(
    value: str,
    key: str | None,
    descriptions: Sequence[str],
    names: frozenset[str],
    echoes: EchoCorpus | None,
) -> str | None:
    """What is wrong with ``value`` as the content of field ``key``, or ``None``."""
    if has_echo_markup(value):
        return "Expected real content, got echoed <tool_response> markup"
    if value.strip(_EDGE) in _MARKER_NAMES:
        return (
            f"Expected your own content, got the name of a correction ({_quote(value.strip())}); "
            "corrections are instructions to you, not values"
        )
    marker = _CORRECTION.search(value)
    if marker is not None:
        return (
            f"Expected your own content, got the text of a correction ({_quote(marker.group())}"
            "); corrections are instructions to you, not values"
        )
    core = value.strip()
    slot = _whole_slot(core, key, names)
    if slot is not None:
        return slot
    inner = _inner_slot(core, names)
    if inner is not None:
        return f"Expected a real value, got the placeholder {inner!r} inside the text"
    folded = normalise(core)
    if folded and _copies_description(folded, descriptions):
        return (
            "Expected a real value, got the schema's description of the field copied in "
            f"({_quote(core)}); write what it describes instead"
        )
    if echoes is not None and echoes.copies(folded):
        return (
            f"Expected your own content, got words copied from a correction you were sent "
            f"({_quote(core)}); do what the correction says instead of repeating it"
        )
    return None


def _whole_slot(core: str, key: str | None, names: frozenset[str]) -> str | None:
    """The error when the whole value is a slot: ``[...]``, ``<...>``, "your X here", TODO."""
    bracket = _WHOLE_BRACKET.match(core)
    if bracket is not None and _reads_as_slot(bracket.group(1), key, names):
        return (
            f"Expected a real value, got a placeholder in square brackets ({_quote(core)}); "
            "write the content itself"
        )
    angle = _WHOLE_ANGLE.match(core)
    if angle is not None and angle.group(1).lower() not in _HTML_TAGS:
        return f"Expected a real value, got the placeholder {core!r}"
    bare = core.strip(_EDGE)
    your = _YOUR_HERE.match(bare)
    if (your is not None and not _VERBS.intersection(your["middle"].lower().split())) or (
        _INSERT_HERE.match(bare) is not None
    ):
        return f"Expected a real value, got the placeholder text {core!r}"
    if (
        core.lower() in _FILLERS
        or bare.lower() in _FILLERS
        or bare.lower().startswith("lorem ipsum")
    ):
        return f"Expected a real value, got the filler {core!r}"
    if _template_path(core):
        return (
            f"Expected a real path, got the placeholder path {core!r} from documentation; "
            "use the path the task gives"
        )
    return None


def _template_path(core: str) -> bool:
    """Whether ``core`` is a path written as documentation writes one: ``/path/to/your/file``."""
    if " " in core or not _PATH_SPLIT.search(core):
        return False
    segments = [s.lower() for s in _PATH_SPLIT.split(core) if s]
    pairs = itertools.pairwise(segments)
    return any(a == "path" and b == "to" for a, b in pairs) or any(
        _TEMPLATE_SEGMENT.match(s.split(".")[0]) for s in segments
    )


def _reads_as_slot(inner: str, key: str | None, names: frozenset[str]) -> bool:
    """Whether the text inside ``[...]`` is a slot to fill rather than content: JSON,
    citations (``[1]``), checkboxes (``[x]``) and plain lists of words are content; a phrase
    with a slot word in it ("Your report") or a lone argument name (``[city]``) is a slot."""
    text = inner.strip()
    if len(re.findall(r"[A-Za-z]", text)) < 2:
        return False
    try:
        json.loads(f"[{text}]")
    except ValueError:
        pass
    else:
        return False
    words = {w.lower() for w in re.findall(r"[A-Za-z_]+", text)}
    if len(words) == 1:
        word = next(iter(words))
        return word in _SLOT_WORDS or word in names or word == (key or "").lower()
    return bool(words & _SLOT_WORDS)


def _inner_slot(core: str, names: frozenset[str]) -> str | None:
    """A slot inside a longer value: ``[Insert name]``, ``<fetched_content>``, ``<city>``."""
    bracket = _INNER_BRACKET.search(core)
    if bracket is not None:
        return bracket.group()
    for match in _INNER_ANGLE.finditer(core):
        if f"</{match.group(1)}>" not in core:
            return match.group()
    for match in _ANGLE_WORD.finditer(core):
        word = match.group(1)
        if word in names and word.lower() not in _HTML_TAGS and f"</{word}>" not in core:
            return match.group()
    return None


def _copies_description(folded: str, descriptions: Sequence[str]) -> bool:
    """Whether ``folded`` is (nearly all) one of ``descriptions``, and nearly nothing else."""
    for text in descriptions:
        if len(text) < _MIN_DESCRIPTION:
            continue
        if not _DESCRIPTION_SHARE * len(text) <= len(folded) <= len(text) / _DESCRIPTION_SHARE:
            continue
        shared = len(_copied_from(folded, text))
        if shared >= _DESCRIPTION_SHARE * len(text) and shared >= _DESCRIPTION_SHARE * len(folded):
            return True
    return False

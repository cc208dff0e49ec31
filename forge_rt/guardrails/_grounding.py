"""An answer that uses nothing the tools returned is sent back once.

A small model that has run the right tools often answers with words that come from nowhere in
its results ("You complete your request."), which passes every schema.
:class:`AnswerGrounding` keeps the words and numbers of the turn's tool results; an answer that
shares none of them is refused **once per turn** with a call to copy that answers with the
results, and the next answer is taken as it is (a model that insists may be right, and a second
refusal would only burn iterations). An answer that is only a confirmation ("Done.", "OK",
"Cannot.") is never refused: after an action it is the answer.

What counts as shared is deliberately loose -- any word of three letters or more that is not a
stop word, or any number, in common -- so an answer that relays a result in its own words
passes. Results with no such words ("ok", "{}") or only numbers ("-3 C" is rightly answered
"Cold.") give nothing to check against, though their numbers count as shared, and so do the
words of the calls' own arguments ("Porto is warm.").

Sharing only words of the user's own request is not enough when the answer goes on to say
things found nowhere (a paragraph the model wrote itself around the request's keywords). An
answer whose shared words all come from the request, and that brings :data:`INVENTED_WORDS` or
more words from neither the request nor the results, is refused the same way (still once per
turn). A terse answer in the request's words ("Lima is warmer.") brings nothing new and passes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from forge_rt.guardrails._nudges import ungrounded_answer_nudge

__all__ = [
    "INVENTED_WORDS",
    "SUBJECT_WORDS",
    "AnswerGrounding",
    "content_tokens",
    "is_confirmation",
    "same_word",
]

# Words from neither the request nor the results that make a request-only answer invented.
INVENTED_WORDS = 3
# The most words an argument value has to count as the subject of a lookup ("Maren Holt").
SUBJECT_WORDS = 4

_MIN_STEM = 3  # a shorter word begins too many others to be the same word inflected
_WORD = re.compile(r"[^\W\d_]{3,}|\d+(?:[.,]\d+)*", re.UNICODE)
_STOP = frozenset(
    (  # noqa: SIM905 -- a word list reads best as words
        "the and for are was were has have had not but you your yours our out all any can "
        "its it's this that these those with from into onto over under about than then them "
        "they their there here what when where which who whom why how will would should could "
        "been being also just only very more most some such each other both few nor own same "
        "too off once again further did does doing done get got call called calls result "
        "results tool tools request task answer message respond please thank thanks"
    ).split()
)
# An answer that is only a confirmation or a refusal says what happened to the action it
# answers ("Turn off the heating" -> "Done."); a sentence with more in it is checked.
_CONFIRMATION = re.compile(
    r"^(?:(?:all\s+)?done|ok(?:ay)?|sure|yes|no|finished|completed?|success(?:ful)?|"
    r"cannot|can't|unable|failed|not possible)[.!]*$",
    re.IGNORECASE,
)


def content_tokens(text: str) -> set[str]:
    """The words of three letters or more (less stop words) and the numbers of ``text``,
    lowercased: what two texts must share to be about the same thing."""
    return {t for t in (m.group().lower() for m in _WORD.finditer(text)) if t not in _STOP}


def same_word(a: str, b: str) -> bool:
    """Whether two content words are one word: equal, or the shorter (three characters or
    more) begins the longer ("book" and "booking": inflection at the end of a word)."""
    short, long = sorted((a, b), key=len)
    return short == long or (len(short) >= _MIN_STEM and long.startswith(short))


def is_confirmation(answer: str) -> bool:
    """Whether ``answer`` only confirms or refuses ("Done.", "OK", "Cannot.")."""
    return _CONFIRMATION.match(answer.strip()) is not None


class AnswerGrounding:
    """The words of this turn's tool results, and whether this turn's one refusal is spent."""

    def __init__(self) -> None:
        self._tokens: set[str] = set()
        self._asked: set[str] = set()  # the words of this turn's request
        self._results: list[tuple[str, bool]] = []  # (text, whether a failed call's error)
        self._any_result = False
        self._refused = False

    def add_result(self, tool: str, output: str, *, failed: bool = False) -> None:
        """Remember one tool result of this turn: a successful call's output, or a failed
        one's error message and tool name (an answer that explains a failure is about the task
        too)."""
        self._any_result = True
        found = content_tokens(output)
        if failed:
            found |= content_tokens(tool.replace("_", " "))
        self._tokens |= found
        if any(not t[0].isdigit() for t in found):
            # Only a result with words can tell an answer from nowhere ("-3 C" -> "Cold.").
            self._results.append((" ".join(output.split()), failed))

    def add_subject(self, values: Iterable[object]) -> None:
        """The argument values of a call of this turn: an answer that names what was looked up
        is about the task, though the result's own words are too few to share. Only a short
        value (up to :data:`SUBJECT_WORDS` words) counts: a longer one is text the model wrote."""
        for value in values:
            if isinstance(value, str) and len(value.split()) <= SUBJECT_WORDS:
                self._tokens |= content_tokens(value)

    def check(self, answer: str) -> str | None:
        """The correction for ``answer`` when it is not about the results (see :meth:`_linked`)
        and this turn has not refused one yet (that refusal is then spent), else ``None``; with
        no successful result to show, nothing is sent back."""
        successes = self.recent_successes
        if self._refused or not successes or self._linked(content_tokens(answer)):
            return None
        if is_confirmation(answer):
            return None  # "Done." after an action is an answer; only prose from nowhere is not
        self._refused = True
        return ungrounded_answer_nudge(" | ".join(successes))

    @property
    def refused(self) -> bool:
        """Whether this turn's one refusal is spent."""
        return self._refused

    @property
    def any_result(self) -> bool:
        """Whether a tool result of this turn came in (with words or not, failed or not)."""
        return self._any_result

    @property
    def recent_results(self) -> tuple[str, ...]:
        """The turn's last three distinct results with words, oldest first ("not found" three
        times over is one)."""
        return _last_distinct([text for text, _ in self._results])

    @property
    def recent_successes(self) -> tuple[str, ...]:
        """Of those, the results of calls that succeeded: what an answer may relay word for
        word (a tool's error is no answer)."""
        return _last_distinct([text for text, failed in self._results if not failed])

    def _linked(self, answer: set[str]) -> bool:
        """Whether an answer of these words is about the results: it shares a word with them
        that the request did not bring, or shares one and invents little else."""
        shared = answer & self._tokens
        if shared - self._asked:
            return True
        invented = answer - self._tokens - self._asked
        return bool(shared) and len(invented) < INVENTED_WORDS

    def reset(self, request: str = "") -> None:
        """A new turn (its user message ``request``): its results, and its one refusal, start
        over."""
        self._tokens = set()
        self._asked = content_tokens(request)
        self._results = []
        self._any_result = False
        self._refused = False


def _last_distinct(results: list[str]) -> tuple[str, ...]:
    """The last three distinct ``results``, oldest first."""
    return tuple(reversed(list(dict.fromkeys(reversed(results)))[:3]))

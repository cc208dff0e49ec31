"""An answer that leaves out what the end of a chain of lookups found is sent back once.

Multi-hop tasks chain their lookups: a value one tool returned (``unit_ref=G-40``) is the
argument of the next call (``find_unit(unit_ref="G-40")``), whose result feeds the one
after. A small model that walked the whole chain often answers from a link in the middle,
which answer grounding (:mod:`forge_rt.guardrails._grounding`) passes: it comes from a result,
but from one the chain had already moved past.

:class:`LookupChains` keeps the turn's distinct successful results in order. A call *follows*
a result when one of its argument values (two characters or more, found in none of the
conversation's requests) is a whole word of it. A result that a later call followed, finding
something not seen before, is a link; a result its call reached by following one, and that no
call followed on, is an *end*. A result's *new* words are those no request, no argument of its
call and no earlier result of the turn had.

A terminal call with prose in it (a string argument of three words or more) is refused, once
per turn, when its words include none of any end's new words; the correction shows the call
again with the ends' results as its text. It passes when it names something an end found; when
it holds a number found nowhere in the turn while an end found a number (worked out from it);
when it has no prose; and when no call of the turn followed a result, which grounding alone
checks. As with grounding, a model that insists may be right: the next answer is taken.

The stricter reading (:meth:`LookupChains.left_out`, the rule ``every_end``) asks that an
answer use *every* end of the turn, where there are two or more -- a fan-out's lookups of the
request's own items included ("the price of A and of B" needs both). An end here is a result
that no later call followed nor *consulted* (took a value of the request that the result
holds), and that the task asked for: its call followed a result or took a value of the request
(a lookup of a value from nowhere is a detour). What counts for one end is one of its *own*
values, which no other end has (a value is a whole token, "2026-09-04", so two dates of one
month are told apart; labels every result shares name none); a word of the answer may be the
value inflected ("rains" for "rain"). A record fetched again (an end whose words another end
holds all of) is one end. A lone end is left to answer grounding, and an answer another reading
already sent back once is taken as it is.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping, Set
from dataclasses import dataclass

from forge_rt.guardrails._grounding import content_tokens, same_word

__all__ = ["REQUESTS_KEPT", "ChainEnds", "LookupChains"]

_MIN_VALUE_CHARS = 2  # a shorter value ("1", "a") is in too many results to link them
_EDGES = ".,;:!?()[]{}<>\"'`|"  # punctuation around a value, not part of it
_PROSE_WORDS = 3  # a string argument of this many words is an answer's text, not an identifier
# The requests whose values are the user's: the last few turns' (a session may run for weeks).
REQUESTS_KEPT = 16


@dataclass(slots=True)
class _Result:
    tool: str
    key: str  # its call's tool and arguments
    text: str  # the output, whitespace collapsed
    new: frozenset[str]  # its words that nothing before it in the turn had
    reached: bool  # its call followed an earlier result
    words: frozenset[str]  # all its words
    arg_words: frozenset[str]  # the words of its call's arguments
    values: frozenset[str]  # its whole values ("2026-09-04", not "2026", "09", "04")
    arg_values: frozenset[str]  # the whole values of its call's arguments
    followed: bool = False  # a later call followed it and found something new
    consulted: bool = False  # a later call, run or not, took one of its words as a value


@dataclass(frozen=True, slots=True)
class ChainEnds:
    """What an answer left out: the tools at the ends of the turn's chains, their results,
    and the answer's argument that is its text (the one the correction rewrites)."""

    tools: tuple[str, ...]
    results: tuple[str, ...]
    field: str


def _values(args: Mapping[str, object]) -> list[str]:
    """A call's argument values that can link it to a result: strings and integers."""
    return [str(v) for v in args.values() if isinstance(v, str | int) and not isinstance(v, bool)]


class LookupChains:
    """The turn's results and which followed which; whether this turn's refusal is spent."""

    def __init__(self) -> None:
        self._requests: deque[str] = deque(maxlen=REQUESTS_KEPT)  # lowercased
        self._request_words: set[str] = set()
        self._request_values: set[str] = set()
        self._results: list[_Result] = []
        self._seen: set[str] = set()  # the words of the turn's results and arguments so far
        self._refused = False
        self._every_refused = False

    def new_turn(self, request: str) -> None:
        """A new turn, asked by ``request``: its results, and its one refusal, start over.
        The last :data:`REQUESTS_KEPT` requests are kept: a value the user gave in an earlier
        turn links no two lookups of a later one."""
        self.remember_request(request)
        self._results = []
        self._seen = set()
        self._refused = False
        self._every_refused = False

    def remember_request(self, request: str) -> None:
        """An earlier request of the conversation, seen in a history handed over whole (the
        proxy): its values link no two lookups, as in :meth:`new_turn`."""
        self._requests.append(request.lower())
        self._request_words = set().union(*(content_tokens(r) for r in self._requests))
        self._request_values = set().union(*(value_tokens(r) for r in self._requests))

    @property
    def request_words(self) -> frozenset[str]:
        """The words of the conversation's last :data:`REQUESTS_KEPT` requests: what the user
        has been asking about ("and for the other one?" follows the question before it)."""
        return frozenset(self._request_words)

    def consult(self, tool: str, args: Mapping[str, object]) -> None:
        """A later call ``tool(**args)`` of this turn was made (ran or failed): a result that
        holds a value of the request it took was consulted, and is no end for :meth:`left_out`;
        the same call again consults nothing."""
        values = [
            v.lower()
            for v in _values(args)
            if len(v.strip()) >= _MIN_VALUE_CHARS
            and any(v.lower() in request for request in self._requests)
        ]
        key = _call_key(tool, args)
        for result in self._results:
            if result.key != key and any(_has_word(result.text.lower(), v) for v in values):
                result.consulted = True

    def add_result(self, tool: str, args: Mapping[str, object], output: str) -> None:
        """A non-terminal call of this turn, ``tool(**args)``, succeeded with ``output``.
        An output the turn has already seen adds nothing, and follows nothing on."""
        text = " ".join(output.split())
        if any(r.text == text for r in self._results):
            return
        values = [
            v.lower()
            for v in _values(args)
            if len(v.strip()) >= _MIN_VALUE_CHARS
            and not any(v.lower() in request for request in self._requests)
        ]
        followed = [r for r in self._results if any(_has_word(r.text.lower(), v) for v in values)]
        words = content_tokens(text)
        arg_words = set().union(*(content_tokens(v) for v in _values(args)))
        new = words - self._request_words - arg_words - self._seen
        if new:  # a call that found nothing new moved no chain on
            for result in followed:
                result.followed = True
        self._seen |= words | arg_words
        self._results.append(
            _Result(
                tool=tool,
                key=_call_key(tool, args),
                text=text,
                new=frozenset(new),
                reached=bool(followed),
                words=frozenset(words),
                arg_words=frozenset(arg_words),
                values=value_tokens(text),
                arg_values=frozenset().union(*(value_tokens(v) for v in _values(args))),
            )
        )

    def check(
        self, args: Mapping[str, object], *, steps: frozenset[str] = frozenset()
    ) -> ChainEnds | None:
        """What a terminal call with ``args`` left out, when it is refused (this turn's
        refusal is then spent), else ``None``. With ``steps`` (the workflow's required steps),
        only a chain that ends in one of them counts: a detour is not what the task asked for."""
        answer = _answer_text(args)
        ends = self._ends(steps)
        if self._refused or answer is None or not ends:
            return None
        words, field = answer
        worked_out = self._worked_out(words)
        if any(_names_one(words, r.new, worked_out=worked_out) for r in ends):
            return None
        self._refused = True
        return ChainEnds(
            tools=tuple(dict.fromkeys(r.tool for r in ends)),
            results=tuple(r.text for r in ends),
            field=field,
        )

    def left_out(
        self,
        args: Mapping[str, object],
        *,
        steps: frozenset[str] = frozenset(),
        answered_once: bool = False,
    ) -> ChainEnds | None:
        """What a terminal call with ``args`` left out of *every* end of the turn (the rule
        ``every_end``), when it is refused (its refusal is then spent), else ``None``: the tools
        of the ends it left out, and the results of all the ends. Prose and ``steps`` as for
        :meth:`check`. Nothing is refused once an answer was sent back this turn: by another
        reading (``answered_once``), by this one or by :meth:`check`."""
        answer = _answer_text(args)
        if self._every_refused or self._refused or answered_once or answer is None:
            return None
        ends = self._own_ends(steps)
        words, field = answer
        worked_out = self._worked_out(words)
        said = value_tokens(" ".join(str(v) for v in args.values() if isinstance(v, str)))
        missing = [
            r for r, own in ends if not _names_one(said, own, worked_out=worked_out, loose=True)
        ]
        if not missing:
            return None
        self._every_refused = True
        return ChainEnds(
            tools=tuple(dict.fromkeys(r.tool for r in missing)),
            results=tuple(r.text for r, _ in ends),
            field=field,
        )

    def _own_ends(self, steps: frozenset[str]) -> list[tuple[_Result, frozenset[str]]]:
        """The turn's ends as :meth:`left_out` reads them (see the module docstring), one per
        record, each with its own values; those with none are left out, and a lone end is left
        to answer grounding. With ``steps``, only the ends of a required step count."""
        ends = _records(
            [
                r
                for r in self._results
                if not (r.followed or r.consulted)
                and (r.reached or r.arg_values & self._request_values)
                and (not steps or r.tool in steps)
            ]
        )
        owned = [(r, _own_values(r, ends, self._request_values)) for r in ends]
        kept = [(r, own) for r, own in owned if own]
        return kept if len(kept) > 1 else []

    def _ends(self, steps: frozenset[str]) -> list[_Result]:
        """The results at the ends of the turn's chains that found something new; with
        ``steps``, only those of a required step."""
        return [
            r
            for r in self._results
            if r.reached and not r.followed and r.new and (not steps or r.tool in steps)
        ]

    def _worked_out(self, words: set[str]) -> bool:
        """Whether an answer of ``words`` holds a number found nowhere in the turn: worked out
        from a result's (a sum, a conversion)."""
        return any(w[0].isdigit() for w in words - self._seen - self._request_words)


def _call_key(tool: str, args: Mapping[str, object]) -> str:
    """One call's tool and arguments, as one comparable text."""
    return f"{tool}:{json.dumps(args, sort_keys=True, default=str)}"


def _answer_text(args: Mapping[str, object]) -> tuple[set[str], str] | None:
    """The words of a terminal call's string arguments and the one that is its answer's text
    (the longest of three words or more); ``None`` where none is prose."""
    texts = {k: v for k, v in args.items() if isinstance(v, str)}
    prose = [k for k, v in texts.items() if len(v.split()) >= _PROSE_WORDS]
    if not prose:
        return None
    words = set().union(*(content_tokens(v) for v in texts.values()))
    return words, max(prose, key=lambda k: len(texts[k]))


def _records(ends: list[_Result]) -> list[_Result]:
    """``ends`` less each one whose words another end holds all of (the same record fetched
    again, in as much detail or more): one record is one end."""
    return [
        r
        for i, r in enumerate(ends)
        if not any(
            o is not r and r.words <= o.words and (r.words < o.words or j > i)
            for j, o in enumerate(ends)
        )
    ]


def _own_values(result: _Result, ends: list[_Result], asked: set[str]) -> frozenset[str]:
    """The values of ``result`` that no other of the ``ends``, no request (``asked``) and no
    argument of its own call has: what only it could have told the answer."""
    others = set().union(*(r.values for r in ends if r is not result))
    return result.values - others - asked - result.arg_values


def value_tokens(text: str) -> frozenset[str]:
    """The whole values of ``text``, lowercased: its whitespace-separated pieces less the
    punctuation around them, those with a content word or a number in them. A date, an id or
    a reading is one value: two records that share a year and a month do not share the date."""
    pieces = (p.strip(_EDGES) for p in text.lower().split())
    return frozenset(p for p in pieces if p and content_tokens(p))


def _names_one(
    words: Set[str], own: frozenset[str], *, worked_out: bool, loose: bool = False
) -> bool:
    """Whether an answer of ``words`` uses an end whose own words are ``own``: it names one
    (``loose``: or a word of it inflected, "rains" for "rain"), or holds a number found nowhere
    (``worked_out``: a sum, a conversion) while the end has one."""
    named = any(same_word(w, o) for w in words for o in own) if loose else bool(words & own)
    return named or (worked_out and any(w[0].isdigit() for w in own))


def _has_word(text: str, value: str) -> bool:
    """Whether ``value`` is in ``text`` with no letter, digit or underscore touching it."""
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text) is not None

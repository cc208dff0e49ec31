"""What the guardrails did for one request, as the proxy's ``x-forge-*`` headers say it.

Both an answer and the error of a request that failed after inferences carry it, so a client
(or the eval, which pairs rules on the cases they fired in, failed ones included) reads the
same headers either way: ``x-forge-attempts`` (the inferences), ``x-forge-rules``
(``rule=count`` for each rule that decided a reply), ``x-forge-repetition-stops`` (replies cut
off because they repeated themselves) and, on an answer, ``x-forge-rescued`` (the dialects its
calls were read from). One struct writes them and reads them back.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from forge_rt.runtime import RunStats

__all__ = ["RequestWork"]

_ATTEMPTS = "x-forge-attempts"
_RULES = "x-forge-rules"
_REPETITION_STOPS = "x-forge-repetition-stops"
_RESCUED = "x-forge-rescued"


class RequestWork(msgspec.Struct, frozen=True, kw_only=True):
    """One request's inferences, the rules that decided its replies (by name, see
    :data:`~forge_rt.guardrails.RULES`), its replies cut off for repeating themselves, and the
    dialects its answer's calls were rescued from."""

    inferences: int = 1
    rules: dict[str, int] = msgspec.field(default_factory=dict)
    repetition_stops: int = 0
    rescued: tuple[str, ...] = ()

    @classmethod
    def of(cls, stats: RunStats, *, rescued: tuple[str, ...] = ()) -> RequestWork:
        """What the guarded step counted for one request."""
        return cls(
            inferences=stats.inferences,
            rules=dict(stats.rules),
            repetition_stops=stats.repetition_stops,
            rescued=rescued,
        )

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The ``x-forge-*`` headers; a count of none is left out, the attempts never."""
        out = [(_ATTEMPTS.encode(), str(self.inferences).encode())]
        if self.rules:
            counts = ",".join(f"{rule}={n}" for rule, n in sorted(self.rules.items()))
            out.append((_RULES.encode(), counts.encode()))
        if self.repetition_stops:
            out.append((_REPETITION_STOPS.encode(), str(self.repetition_stops).encode()))
        if self.rescued:
            out.append((_RESCUED.encode(), ",".join(self.rescued).encode()))
        return out

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> RequestWork | None:
        """The work a response's headers report; ``None`` where it carries none (a response
        that did not come from a guarded request, such as the backend's own or a 400 before any
        inference). Raises :class:`ValueError` on a header that is not what the proxy writes."""
        attempts = headers.get(_ATTEMPTS)
        if attempts is None:
            return None
        rules: dict[str, int] = {}
        for item in headers.get(_RULES, "").split(","):
            if item:
                rule, sep, count = item.partition("=")
                if not sep:
                    raise ValueError(f"{_RULES} item {item!r} is not rule=count")
                rules[rule] = int(count)
        rescued = tuple(d for d in headers.get(_RESCUED, "").split(",") if d)
        return cls(
            inferences=int(attempts),
            rules=rules,
            repetition_stops=int(headers.get(_REPETITION_STOPS, "0")),
            rescued=rescued,
        )

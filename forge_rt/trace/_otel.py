"""Trace events as OpenTelemetry spans, for when ``opentelemetry`` (the API) is installed.

Each turn is one span (``forge_rt.turn``, named attributes ``forge_rt.actor``,
``forge_rt.workflow``, ``forge_rt.turn``), ended by the turn's end with its costs as
attributes and an error status when the turn failed. Every event of the turn is a span event
named by its tag (``request``, ``reply``, ``verdict``, ``tool``, ``record``, ``slot``) with its
fields as attributes: scalars as they are, structures as JSON. The spans go wherever the
application's tracer provider sends them; without one the API's no-op tracer drops them.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

import msgspec

from forge_rt.trace._events import TraceEvent, TraceHeader, TurnEnded, TurnStarted

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = ["OtelTraceSink", "otel_available"]


def otel_available() -> bool:
    """Whether the OpenTelemetry API can be imported here."""
    return (
        importlib.util.find_spec("opentelemetry") is not None
        and importlib.util.find_spec("opentelemetry.trace") is not None
    )


_encoder = msgspec.json.Encoder()
_Attribute = str | bool | int | float | list[str]


class OtelTraceSink:
    """Turns as spans and their events as span events, on ``tracer`` (by default the global
    provider's tracer named ``forge_rt``)."""

    def __init__(self, tracer: Tracer | None = None) -> None:
        from opentelemetry import trace

        self._tracer = tracer if tracer is not None else trace.get_tracer("forge_rt")
        self._workflows: dict[str, str] = {}
        self._turns: dict[str, Span] = {}

    def emit(self, event: TraceEvent) -> None:
        actor = event.actor
        if isinstance(event, TraceHeader):
            self._workflows[actor] = event.workflow
            return
        if isinstance(event, TurnStarted):
            self._turns[actor] = self._tracer.start_span(
                "forge_rt.turn",
                attributes={
                    "forge_rt.actor": actor,
                    "forge_rt.workflow": self._workflows.get(actor, ""),
                    "forge_rt.turn": event.turn,
                },
            )
            return
        span = self._turns.get(actor)
        if isinstance(event, TurnEnded):
            if span is None:
                return  # a turn that began before this sink did
            del self._turns[actor]
            span.set_attributes(_attributes(event))
            if not event.ok:
                from opentelemetry.trace import Status, StatusCode

                span.set_status(Status(StatusCode.ERROR, event.error_type))
            span.end()
            return
        tag = type(event).__struct_config__.tag
        if span is None:
            # Outside a turn (a sink opened mid-turn): its own short span, so nothing is lost.
            span = self._tracer.start_span(f"forge_rt.{tag}", attributes={"forge_rt.actor": actor})
            span.set_attributes(_attributes(event))
            span.end()
            return
        span.add_event(str(tag), attributes=_attributes(event))

    def close(self) -> None:
        """End the spans of turns still open (the run stopped mid-turn)."""
        for span in self._turns.values():
            span.end()
        self._turns.clear()


def _attributes(event: TraceEvent) -> dict[str, _Attribute]:
    out: dict[str, _Attribute] = {}
    for name, value in msgspec.structs.asdict(event).items():
        if value is None or name in ("actor", "t"):
            continue
        out[f"forge_rt.{name}"] = _attribute(value)
    return out


def _attribute(value: Any) -> _Attribute:
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, tuple | list) and all(isinstance(v, str) for v in value):
        return list(value)
    return _encoder.encode(value).decode()

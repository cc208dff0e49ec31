"""Run traces: every turn's requests, replies, verdicts, tools and slot events, and replay.

A :class:`TraceSink` receives typed events (see ``_events.py`` and docs/traces.md);
``Session.open(trace=path)`` writes one JSONL file per workflow actor into the folder ``path``
(and OpenTelemetry spans when the API is installed). :func:`replay` runs today's guardrails
over a recorded trace's replies, with no model, and reports each decision they make
differently; ``forge-rt replay`` and ``forge-rt trace show`` are its command line.
"""

from forge_rt.trace._decision import decision_of as decision_of
from forge_rt.trace._decision import messages_hash as messages_hash
from forge_rt.trace._decision import record_decision as record_decision
from forge_rt.trace._events import SCHEMA_VERSION as SCHEMA_VERSION
from forge_rt.trace._events import CallRecord as CallRecord
from forge_rt.trace._events import Decision as Decision
from forge_rt.trace._events import PrerequisiteRecord as PrerequisiteRecord
from forge_rt.trace._events import RecordDecision as RecordDecision
from forge_rt.trace._events import Recorded as Recorded
from forge_rt.trace._events import RefusalRecord as RefusalRecord
from forge_rt.trace._events import ReplyReceived as ReplyReceived
from forge_rt.trace._events import RequestSent as RequestSent
from forge_rt.trace._events import SlotEvent as SlotEvent
from forge_rt.trace._events import SlotEventKind as SlotEventKind
from forge_rt.trace._events import ToolRan as ToolRan
from forge_rt.trace._events import ToolRecord as ToolRecord
from forge_rt.trace._events import TraceEvent as TraceEvent
from forge_rt.trace._events import TraceHeader as TraceHeader
from forge_rt.trace._events import TurnEnded as TurnEnded
from forge_rt.trace._events import TurnStarted as TurnStarted
from forge_rt.trace._events import VerdictMade as VerdictMade
from forge_rt.trace._otel import OtelTraceSink as OtelTraceSink
from forge_rt.trace._otel import otel_available as otel_available
from forge_rt.trace._reader import read_trace as read_trace
from forge_rt.trace._reader import trace_files as trace_files
from forge_rt.trace._replay import Difference as Difference
from forge_rt.trace._replay import ReplayReport as ReplayReport
from forge_rt.trace._replay import replay as replay
from forge_rt.trace._replay import replay_events as replay_events
from forge_rt.trace._sinks import JsonlTraceSink as JsonlTraceSink
from forge_rt.trace._sinks import TeeSink as TeeSink
from forge_rt.trace._sinks import TraceFolder as TraceFolder
from forge_rt.trace._sinks import TraceSink as TraceSink
from forge_rt.trace._sinks import open_trace as open_trace
from forge_rt.trace._sinks import opened_trace as opened_trace
from forge_rt.trace._tracer import Tracer as Tracer

__all__ = [
    "SCHEMA_VERSION",
    "CallRecord",
    "Decision",
    "Difference",
    "JsonlTraceSink",
    "OtelTraceSink",
    "PrerequisiteRecord",
    "RecordDecision",
    "Recorded",
    "RefusalRecord",
    "ReplayReport",
    "ReplyReceived",
    "RequestSent",
    "SlotEvent",
    "SlotEventKind",
    "TeeSink",
    "ToolRan",
    "ToolRecord",
    "TraceEvent",
    "TraceFolder",
    "TraceHeader",
    "TraceSink",
    "Tracer",
    "TurnEnded",
    "TurnStarted",
    "VerdictMade",
    "decision_of",
    "messages_hash",
    "open_trace",
    "opened_trace",
    "otel_available",
    "read_trace",
    "record_decision",
    "replay",
    "replay_events",
    "trace_files",
]

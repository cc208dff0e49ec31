"""The reliability core shared by the runtime, the proxy and the middleware facade.

Rescue parsing, response validation, nudges, error budgets, step and prerequisite enforcement,
the loop guard, the synthetic respond tool and constrained decoding -- each piece independently
testable and composable.
"""

# --- rescue parsing, respond tool, constrained decoding (exports) ---
from forge_rt.guardrails._constrain import ConstraintDecision as ConstraintDecision
from forge_rt.guardrails._constrain import NarrowedConstraint as NarrowedConstraint
from forge_rt.guardrails._constrain import choose_constraint as choose_constraint
from forge_rt.guardrails._constrain import schema_grammar as schema_grammar
from forge_rt.guardrails._constrain import tool_call_grammar as tool_call_grammar
from forge_rt.guardrails._constrain import tool_call_schema as tool_call_schema
from forge_rt.guardrails._continue import Continuation as Continuation
from forge_rt.guardrails._continue import continuation_constraint as continuation_constraint
from forge_rt.guardrails._dialects import JSON_CALL_OPENERS as JSON_CALL_OPENERS
from forge_rt.guardrails._dialects import TEXT_CALL_MARKERS as TEXT_CALL_MARKERS
from forge_rt.guardrails._dialects import Dialect as Dialect
from forge_rt.guardrails._dialects import render_call as render_call
from forge_rt.guardrails._exclude import EXCLUDED_PREFIX_CHARS as EXCLUDED_PREFIX_CHARS
from forge_rt.guardrails._exclude import StartsWith as StartsWith
from forge_rt.guardrails._gbnf import Gbnf as Gbnf
from forge_rt.guardrails._rescue import RescueResult as RescueResult
from forge_rt.guardrails._rescue import rescue as rescue
from forge_rt.guardrails._rescue import rescue_tool_calls as rescue_tool_calls
from forge_rt.guardrails._rescue import split_reasoning as split_reasoning
from forge_rt.guardrails._rescue_args import coerce_args as coerce_args
from forge_rt.guardrails._respond import respond_spec as respond_spec
from forge_rt.guardrails._respond import split_respond as split_respond
from forge_rt.guardrails._respond import with_respond as with_respond
from forge_rt.guardrails._respond import workflow_tool_specs as workflow_tool_specs
from forge_rt.guardrails._respond import workflow_writes as workflow_writes
from forge_rt.guardrails._shape import CallShape as CallShape

# isort: split
# --- end rescue block ---

# --- validation, nudges, budgets, steps, loop guard, facade (exports) ---
from forge_rt.guardrails._actions import Action as Action
from forge_rt.guardrails._actions import BlockReason as BlockReason
from forge_rt.guardrails._actions import Execute as Execute
from forge_rt.guardrails._actions import Fatal as Fatal
from forge_rt.guardrails._actions import Refusal as Refusal
from forge_rt.guardrails._actions import Rejection as Rejection
from forge_rt.guardrails._actions import RetryReason as RetryReason
from forge_rt.guardrails._actions import RetryWithNudge as RetryWithNudge
from forge_rt.guardrails._actions import StepBlocked as StepBlocked
from forge_rt.guardrails._actions import TextAnswer as TextAnswer
from forge_rt.guardrails._actions import ToolErrors as ToolErrors
from forge_rt.guardrails._actions import retry_reason as retry_reason
from forge_rt.guardrails._errors_budget import ErrorTracker as ErrorTracker
from forge_rt.guardrails._facade import Budgets as Budgets
from forge_rt.guardrails._facade import Guardrails as Guardrails
from forge_rt.guardrails._facade import RecordOutcome as RecordOutcome
from forge_rt.guardrails._facade import ToolResult as ToolResult
from forge_rt.guardrails._loop_guard import LoopGuard as LoopGuard
from forge_rt.guardrails._nudges import Nudge as Nudge
from forge_rt.guardrails._nudges import RetryCause as RetryCause
from forge_rt.guardrails._nudges import bad_args_nudge as bad_args_nudge
from forge_rt.guardrails._nudges import describe_field as describe_field
from forge_rt.guardrails._nudges import example_call as example_call
from forge_rt.guardrails._nudges import held_back_nudge as held_back_nudge
from forge_rt.guardrails._nudges import ignored_args_note as ignored_args_note
from forge_rt.guardrails._nudges import loop_nudge as loop_nudge
from forge_rt.guardrails._nudges import premature_terminal_nudge as premature_terminal_nudge
from forge_rt.guardrails._nudges import prerequisite_nudge as prerequisite_nudge
from forge_rt.guardrails._nudges import retry_nudge as retry_nudge
from forge_rt.guardrails._nudges import unknown_tool_nudge as unknown_tool_nudge
from forge_rt.guardrails._options import GuardrailOptions as GuardrailOptions
from forge_rt.guardrails._rules import RULES as RULES
from forge_rt.guardrails._rules import SCHEMA_RULE as SCHEMA_RULE
from forge_rt.guardrails._rules import Rule as Rule
from forge_rt.guardrails._rules import RuleStage as RuleStage
from forge_rt.guardrails._rules import rule_named as rule_named
from forge_rt.guardrails._steps import StepEnforcer as StepEnforcer
from forge_rt.guardrails._validator import ResponseValidator as ResponseValidator
from forge_rt.guardrails._validator import ValidationResult as ValidationResult
from forge_rt.guardrails._validator import collapse_calls as collapse_calls
from forge_rt.guardrails._validator import cut_cause as cut_cause

# --- end validation block ---

# isort: split
# --- reply bounds: budgets, constraint bounds, the repetition stop (exports) ---
from forge_rt.guardrails._bounds import DEFAULT_MAX_CALLS as DEFAULT_MAX_CALLS
from forge_rt.guardrails._bounds import DEFAULT_MAX_ITEMS as DEFAULT_MAX_ITEMS
from forge_rt.guardrails._bounds import DEFAULT_MAX_LENGTH as DEFAULT_MAX_LENGTH
from forge_rt.guardrails._bounds import FREE_CALL_MIN_TOKENS as FREE_CALL_MIN_TOKENS
from forge_rt.guardrails._bounds import INTEGER_TOKENS as INTEGER_TOKENS
from forge_rt.guardrails._bounds import MAX_REPLY_TOKENS as MAX_REPLY_TOKENS
from forge_rt.guardrails._bounds import NUMBER_TOKENS as NUMBER_TOKENS
from forge_rt.guardrails._bounds import PLAIN_REPLY_TOKENS as PLAIN_REPLY_TOKENS
from forge_rt.guardrails._bounds import STRING_CHARS_PER_TOKEN as STRING_CHARS_PER_TOKEN
from forge_rt.guardrails._bounds import bounded as bounded
from forge_rt.guardrails._bounds import call_tokens as call_tokens
from forge_rt.guardrails._bounds import calls_tokens as calls_tokens
from forge_rt.guardrails._bounds import instance_tokens as instance_tokens
from forge_rt.guardrails._constrain import reply_token_budget as reply_token_budget
from forge_rt.guardrails._repetition import CALL_REPEATS as CALL_REPEATS
from forge_rt.guardrails._repetition import CYCLE_LINES as CYCLE_LINES
from forge_rt.guardrails._repetition import LINE_MIN_CHARS as LINE_MIN_CHARS
from forge_rt.guardrails._repetition import LINE_REPEATS as LINE_REPEATS
from forge_rt.guardrails._repetition import REPETITION_FINISH_REASON as REPETITION_FINISH_REASON
from forge_rt.guardrails._repetition import SPACE_RUN as SPACE_RUN
from forge_rt.guardrails._repetition import Repetition as Repetition
from forge_rt.guardrails._repetition import RepetitionDetector as RepetitionDetector

# --- end reply bounds block ---

# isort: split
# --- tool policy: allow, deny, approve (exports) ---
from forge_rt.guardrails._policy import Allow as Allow
from forge_rt.guardrails._policy import Approve as Approve
from forge_rt.guardrails._policy import Decision as Decision
from forge_rt.guardrails._policy import Deny as Deny
from forge_rt.guardrails._policy import Policy as Policy
from forge_rt.guardrails._policy import Verdict as Verdict
from forge_rt.guardrails._policy import WorkflowPolicy as WorkflowPolicy
from forge_rt.guardrails._policy import apply_policy as apply_policy

# --- end tool policy block ---

__all__: list[str] = [  # noqa: RUF022 -- grouped by owning block (see above), each group sorted
    # rescue block names
    "EXCLUDED_PREFIX_CHARS",
    "JSON_CALL_OPENERS",
    "TEXT_CALL_MARKERS",
    "CallShape",
    "ConstraintDecision",
    "Continuation",
    "Dialect",
    "Gbnf",
    "NarrowedConstraint",
    "RescueResult",
    "StartsWith",
    "choose_constraint",
    "coerce_args",
    "continuation_constraint",
    "render_call",
    "rescue",
    "rescue_tool_calls",
    "respond_spec",
    "schema_grammar",
    "split_reasoning",
    "split_respond",
    "tool_call_grammar",
    "tool_call_schema",
    "with_respond",
    "workflow_tool_specs",
    "workflow_writes",
    # validation block names
    "Action",
    "BlockReason",
    "Budgets",
    "ErrorTracker",
    "Execute",
    "Fatal",
    "GuardrailOptions",
    "Guardrails",
    "LoopGuard",
    "Nudge",
    "RecordOutcome",
    "Refusal",
    "Rejection",
    "ResponseValidator",
    "RetryCause",
    "RetryReason",
    "RetryWithNudge",
    "RULES",
    "Rule",
    "RuleStage",
    "SCHEMA_RULE",
    "StepBlocked",
    "StepEnforcer",
    "TextAnswer",
    "ToolErrors",
    "ToolResult",
    "ValidationResult",
    "bad_args_nudge",
    "collapse_calls",
    "cut_cause",
    "describe_field",
    "example_call",
    "held_back_nudge",
    "ignored_args_note",
    "loop_nudge",
    "premature_terminal_nudge",
    "prerequisite_nudge",
    "retry_nudge",
    "retry_reason",
    "rule_named",
    "unknown_tool_nudge",
    # reply bounds block names
    "CALL_REPEATS",
    "CYCLE_LINES",
    "DEFAULT_MAX_CALLS",
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_MAX_LENGTH",
    "FREE_CALL_MIN_TOKENS",
    "INTEGER_TOKENS",
    "LINE_MIN_CHARS",
    "LINE_REPEATS",
    "MAX_REPLY_TOKENS",
    "NUMBER_TOKENS",
    "PLAIN_REPLY_TOKENS",
    "REPETITION_FINISH_REASON",
    "STRING_CHARS_PER_TOKEN",
    "Repetition",
    "RepetitionDetector",
    "SPACE_RUN",
    "bounded",
    "call_tokens",
    "calls_tokens",
    "instance_tokens",
    "reply_token_budget",
    # tool policy block names
    "Allow",
    "Approve",
    "Decision",
    "Deny",
    "Policy",
    "Verdict",
    "WorkflowPolicy",
    "apply_policy",
]

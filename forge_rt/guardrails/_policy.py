"""A policy gate over tools: allow, deny (withheld, with a reason) or approve (ask first).

A :class:`Policy` gives every tool one verdict, and says which rule gave it (an explained
verdict, shown by ``forge-rt capabilities``). The rules, in the order they are consulted:

1. a rule for the tool's **name** decides alone;
2. else the rules for the **capabilities** the tool needs (its declared ``needs``; an
   undeclared tool needs every capability): the most restrictive of those that match wins
   (deny over approve over allow; among equals, the first capability in
   :class:`~forge_rt.core.Capability` order);
3. else the **default** (allow, unless the policy says otherwise).

What the verdicts do is the runtime's and the proxy's business: a denied tool is withheld from
the prompt and from the constraint grammar, and a call the model invents for it is refused
with the policy's reason; a call of a tool to approve waits until someone says yes or no.

A policy is written in code or in TOML (see :meth:`Policy.loads`)::

    default = "allow"

    [tools]
    turn_off_heating = { verdict = "approve", question = "Turn off the heating?" }
    wipe_disk = { verdict = "deny", reason = "never from a chat" }

    [capabilities]
    costs_money = { verdict = "deny", reason = "this assistant has no budget" }
    network = "approve"
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import pydantic
from pydantic import BaseModel, ConfigDict

from forge_rt.core import ALL_CAPABILITIES, Capability, ToolDef, Workflow
from forge_rt.errors import PolicyError

__all__ = [
    "Allow",
    "Approve",
    "Decision",
    "Deny",
    "Policy",
    "Verdict",
    "WorkflowPolicy",
    "apply_policy",
]


class Allow(msgspec.Struct, frozen=True, tag="allow"):
    """The tool is offered and runs like any other."""

    def describe(self) -> str:
        return ""


class Deny(msgspec.Struct, frozen=True, tag="deny"):
    """The tool is withheld: never offered, never run; ``reason`` is what the model (and the
    capabilities table) is told."""

    reason: str

    def __post_init__(self) -> None:
        if not self.reason.strip():
            raise PolicyError("a deny verdict needs a reason: it is what the model is told")

    def describe(self) -> str:
        return self.reason


class Approve(msgspec.Struct, frozen=True, tag="approve"):
    """The tool is offered, but each call waits for a yes or no before it runs; ``question`` is
    what the approver is asked (without one, the request names the tool and its arguments)."""

    question: str | None = None

    def describe(self) -> str:
        return self.question or "ask before each call"


Verdict = Allow | Deny | Approve
"""What a policy says about one tool."""

_SEVERITY: dict[type[Verdict], int] = {Allow: 0, Approve: 1, Deny: 2}


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict for one tool and why: ``rule`` names the rule that decided (``tool 'x'``,
    ``capability 'network'``, ``default``); ``needs``: the capabilities it went by; ``declared``
    is false when the tool declared none (so it was taken to need them all)."""

    tool: str
    verdict: Verdict
    rule: str
    needs: frozenset[Capability]
    declared: bool

    @property
    def reason(self) -> str:
        """The deny reason or the approval question; empty for allow."""
        return self.verdict.describe()


class _Rule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    verdict: str
    reason: str | None = None
    question: str | None = None


class _PolicyFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    default: str | _Rule = "allow"
    tools: dict[str, str | _Rule] = {}
    capabilities: dict[str, str | _Rule] = {}


def _verdict(value: str | _Rule | Verdict, rule: str) -> Verdict:
    """A verdict from its TOML form: a name (``"allow"``, ``"approve"``) or a table."""
    if isinstance(value, Allow | Deny | Approve):
        return value
    spec = _Rule(verdict=value) if isinstance(value, str) else value
    if spec.verdict == "allow" and spec.reason is None and spec.question is None:
        return Allow()
    if spec.verdict == "deny" and spec.question is None:
        if spec.reason is None or not spec.reason.strip():
            raise PolicyError(
                f"policy rule {rule}: a deny rule needs a reason, the model is told it: write "
                '{ verdict = "deny", reason = "..." }',
                rule=rule,
            )
        return Deny(spec.reason)
    if spec.verdict == "approve" and spec.reason is None:
        return Approve(spec.question)
    if spec.verdict not in ("allow", "deny", "approve"):
        raise PolicyError(
            f"policy rule {rule}: unknown verdict {spec.verdict!r}; use allow, deny or approve",
            rule=rule,
        )
    extra = "question" if spec.question is not None else "reason"
    raise PolicyError(
        f"policy rule {rule}: a {spec.verdict} rule takes no {extra} (deny takes a reason, "
        "approve a question)",
        rule=rule,
    )


def _capability(value: Capability | str) -> Capability:
    try:
        return Capability(value)
    except ValueError:
        known = ", ".join(c.value for c in Capability)
        raise PolicyError(
            f"policy rule capability {value!r}: unknown capability; the capabilities are {known}",
            rule=f"capability {value!r}",
        ) from None


class Policy:
    """Verdicts for tools, by name, by the capabilities they need, and by default.

    ``tools`` and ``capabilities`` map a tool name or a capability to a :data:`Verdict` or its
    TOML form. Raises :class:`PolicyError` for an unknown capability or verdict, or a deny
    without a reason.
    """

    def __init__(
        self,
        *,
        default: Verdict | str = "allow",
        tools: Mapping[str, Verdict | str | Mapping[str, Any]] | None = None,
        capabilities: Mapping[Capability | str, Verdict | str | Mapping[str, Any]] | None = None,
    ) -> None:
        self.default: Verdict = _verdict(_rule_form(default, "default"), "default")
        self.tools: dict[str, Verdict] = {
            name: _verdict(_rule_form(v, f"tool {name!r}"), f"tool {name!r}")
            for name, v in (tools or {}).items()
        }
        by_capability: dict[Capability, Verdict] = {}
        for key, value in (capabilities or {}).items():
            capability = _capability(key)
            where = f"capability {capability.value!r}"
            by_capability[capability] = _verdict(_rule_form(value, where), where)
        self.capabilities = by_capability

    @classmethod
    def loads(cls, text: str, *, source: str = "<policy>") -> Policy:
        """A policy from TOML text: ``default``, a ``[tools]`` and a ``[capabilities]`` table
        (see the module docstring). Raises :class:`PolicyError` naming ``source``."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"policy {source}: not valid TOML: {exc}") from exc
        return cls.from_mapping(data, source=source)

    @classmethod
    def load(cls, path: Path) -> Policy:
        """A policy from a TOML file (see :meth:`loads`)."""
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PolicyError(f"policy {path}: cannot read it: {exc}") from exc
        return cls.loads(text, source=str(path))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "<policy>") -> Policy:
        """A policy from its TOML structure already parsed (a config file's table)."""
        try:
            parsed = _PolicyFile.model_validate(data)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()
            )
            raise PolicyError(
                f"policy {source}: {problems} (a policy has default, [tools] and [capabilities])"
            ) from exc
        try:
            return cls(
                default=_verdict(parsed.default, "default"),
                tools={n: _verdict(v, f"tool {n!r}") for n, v in parsed.tools.items()},
                capabilities=dict(parsed.capabilities),  # type: ignore[arg-type]
            )
        except PolicyError as exc:
            raise PolicyError(f"policy {source}: {exc}", rule=exc.rule) from exc

    def decide(self, tool: ToolDef) -> Decision:
        """The verdict for ``tool``, and the rule that gave it."""
        needs = tool.effective_needs
        by_name = self.tools.get(tool.name)
        if by_name is not None:
            rule = f"tool {tool.name!r}"
            return self._decision(tool, by_name, rule, needs)
        matched = [
            (c, self.capabilities[c]) for c in Capability if c in needs and c in self.capabilities
        ]
        if matched:
            capability, verdict = max(matched, key=lambda cv: _SEVERITY[type(cv[1])])
            # max keeps the first of equals: the first capability in Capability order.
            return self._decision(tool, verdict, f"capability {capability.value!r}", needs)
        return self._decision(tool, self.default, "default", needs)

    def decide_name(self, name: str) -> Decision:
        """The verdict for a tool known only by name (a proxy client's tool): its name rule,
        else the default. Capability rules do not apply: nothing says what it needs."""
        verdict = self.tools.get(name)
        rule = f"tool {name!r}" if verdict is not None else "default"
        return Decision(
            tool=name,
            verdict=self.default if verdict is None else verdict,
            rule=rule,
            needs=ALL_CAPABILITIES,
            declared=False,
        )

    def check_names(self, names: Iterable[str], *, where: str) -> None:
        """Raise :class:`PolicyError` if a tool rule names a tool not in ``names``: a rule that
        can never apply is a misspelling that would let the intended tool through."""
        known = set(names)
        unknown = sorted(set(self.tools) - known)
        if unknown:
            raise PolicyError(
                f"policy: rule(s) for tool(s) {unknown} that {where} does not have; its tools "
                f"are {sorted(known)}",
                rule=f"tool {unknown[0]!r}",
            )

    def _decision(
        self, tool: ToolDef, verdict: Verdict, rule: str, needs: frozenset[Capability]
    ) -> Decision:
        return Decision(
            tool=tool.name, verdict=verdict, rule=rule, needs=needs, declared=tool.needs_declared
        )

    def __repr__(self) -> str:
        return (
            f"Policy(default={self.default!r}, tools={self.tools!r}, "
            f"capabilities={self.capabilities!r})"
        )


def _rule_form(value: Verdict | str | Mapping[str, Any], rule: str) -> Verdict | str | _Rule:
    """A rule given in code: a verdict, a verdict name, or a mapping as TOML would have it."""
    if isinstance(value, Allow | Deny | Approve | str):
        return value
    try:
        return _Rule.model_validate(value)
    except pydantic.ValidationError as exc:
        raise PolicyError(
            f"policy rule {rule}: {exc.errors()[0]['msg']} (a rule is a verdict name or a "
            "table with verdict and reason / question)",
            rule=rule,
        ) from exc


class WorkflowPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """A policy applied to one workflow: ``workflow`` without its denied tools (what the
    prompt, the grammar and execution see); ``withheld`` maps each denied tool to the policy's
    reason (what a call of it is refused with); ``approve`` maps each tool whose calls need an
    approval to its verdict; ``decisions`` is every tool's decision, in the workflow's order."""

    workflow: Workflow
    withheld: Mapping[str, str]
    approve: Mapping[str, Approve]
    decisions: tuple[Decision, ...]


def apply_policy(workflow: Workflow, policy: Policy) -> WorkflowPolicy:
    """``workflow`` under ``policy``: its denied tools removed, the rest verdicts recorded.
    Raises :class:`PolicyError` when a tool rule names a tool the workflow lacks, or a denied
    tool is one the workflow cannot do without: a required step, the prerequisite of a tool
    that stays, or its only terminal tool(s)."""
    policy.check_names(workflow.tools, where=f"workflow {workflow.name!r}")
    decisions = tuple(policy.decide(tool) for tool in workflow.tools.values())
    denied = {d.tool: d for d in decisions if isinstance(d.verdict, Deny)}
    _check_required_steps(workflow, denied)
    _check_prerequisites(workflow, denied)
    kept_terminal = _kept_terminal(workflow, denied)
    return WorkflowPolicy(
        workflow=_without(workflow, denied, kept_terminal) if denied else workflow,
        withheld={name: d.reason for name, d in denied.items()},
        approve={d.tool: d.verdict for d in decisions if isinstance(d.verdict, Approve)},
        decisions=decisions,
    )


def _check_required_steps(workflow: Workflow, denied: Mapping[str, Decision]) -> None:
    """Raise :class:`PolicyError` if the policy denies a required step: the workflow could
    never finish."""
    for step in workflow.required_steps:
        if step in denied:
            raise PolicyError(
                f"workflow {workflow.name!r}: required step {step!r} is denied by the policy "
                f"({denied[step].rule}: {denied[step].reason}); the workflow cannot finish "
                "without it: allow it or drop the step",
                rule=denied[step].rule,
            )


def _check_prerequisites(workflow: Workflow, denied: Mapping[str, Decision]) -> None:
    """Raise :class:`PolicyError` if the policy denies the prerequisite of a tool it keeps:
    that tool could never run."""
    for tool in workflow.tools.values():
        if tool.name in denied:
            continue
        for prereq in tool.prerequisites:
            if prereq.tool in denied:
                raise PolicyError(
                    f"workflow {workflow.name!r}: {prereq.tool!r}, a prerequisite of "
                    f"{tool.name!r}, is denied by the policy ({denied[prereq.tool].rule}); "
                    f"{tool.name!r} could never run: deny it too, or allow {prereq.tool!r}",
                    rule=denied[prereq.tool].rule,
                )


def _kept_terminal(workflow: Workflow, denied: Mapping[str, Decision]) -> tuple[str, ...]:
    """The terminal tools the policy leaves, sorted; raise :class:`PolicyError` when it
    denies them all: the workflow could never end."""
    terminal = workflow.terminal_tools
    kept = tuple(sorted(terminal - set(denied)))
    if not kept:
        rules = ", ".join(denied[t].rule for t in sorted(terminal))
        raise PolicyError(
            f"workflow {workflow.name!r}: every terminal tool {sorted(terminal)} is denied by "
            f"the policy ({rules}); the workflow could never end: allow one of them",
            rule=denied[min(terminal)].rule,
        )
    return kept


def _without(
    workflow: Workflow, denied: Mapping[str, Decision], kept_terminal: tuple[str, ...]
) -> Workflow:
    """``workflow`` without its ``denied`` tools, its terminal tool(s) cut to those kept."""
    fields = {name: getattr(workflow, name) for name in type(workflow).model_fields}
    fields["tools"] = {n: t for n, t in workflow.tools.items() if n not in denied}
    if workflow.terminal_tool is not None:
        fields["terminal_tool"] = kept_terminal[0] if len(kept_terminal) == 1 else kept_terminal
    return Workflow(**fields)

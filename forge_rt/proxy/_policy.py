"""The proxy's tool policy: tools a client sends are allowed or withheld by name.

The proxy knows a client's tools only by name and schema: nothing says what they need, so only
name rules and the default apply (a ``[capabilities]`` rule is refused: every client tool
would be "undeclared" and meet it). And it never runs them -- its client does -- so it cannot
pause a call for approval: ``approve`` is refused too, with the reason, when the config is
built. A denied tool is removed from the request before it reaches the backend (prompt and
constraint), and a call the model makes to it anyway is refused with the policy's reason and
retried server-side like any invalid call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from actors import quiet_logger
from forge_rt.core import InferenceRequest
from forge_rt.errors import PolicyError
from forge_rt.guardrails import Approve, Deny, Policy
from forge_rt.proxy._errors import ErrorKind, ProxyHTTPError

__all__ = ["proxy_policy", "withhold"]

log = quiet_logger(__name__)


def proxy_policy(value: Policy | Mapping[str, Any]) -> Policy:
    """A policy the proxy can apply (from a ``Policy`` or its TOML table), or
    :class:`PolicyError` saying why it cannot."""
    policy = value if isinstance(value, Policy) else Policy.from_mapping(value, source="proxy")
    if policy.capabilities:
        names = sorted(c.value for c in policy.capabilities)
        raise PolicyError(
            f"proxy policy: capability rules {names} cannot apply: a client's tools arrive "
            "by name and schema only, with no declared needs; write rules by tool name "
            "([tools]) and a default",
            rule=f"capability {names[0]!r}",
        )
    rules = {"default": policy.default} | {f"tool {n!r}": v for n, v in policy.tools.items()}
    for rule, verdict in rules.items():
        if isinstance(verdict, Approve):
            raise PolicyError(
                f"proxy policy: {rule} says approve, which the proxy cannot do: its client "
                "runs the tools itself, so a call cannot be paused here; approve in the "
                "client, or use allow or deny",
                rule=rule,
            )
    return policy


def withhold(
    request: InferenceRequest, policy: Policy, *, request_id: str
) -> tuple[InferenceRequest, dict[str, str]]:
    """``request`` without the tools ``policy`` denies, and those tools' reasons.

    A ``tool_choice`` naming a denied tool is a 400: the client demands what may not run.
    """
    withheld: dict[str, str] = {}
    for tool in request.tools:
        verdict = policy.decide_name(tool.name).verdict
        if isinstance(verdict, Deny):
            withheld[tool.name] = verdict.reason
    if not withheld:
        return request, withheld
    choice = request.tool_choice
    if choice is not None and choice in withheld:
        raise ProxyHTTPError(
            ErrorKind.BAD_REQUEST,
            f"tool_choice names {choice!r}, which this proxy's policy denies "
            f"({withheld[choice]}); choose another tool or none",
            code="tool_denied",
            param="tool_choice",
        )
    log.info("proxy.tools_withheld", request=request_id, tools=sorted(withheld))
    kept = tuple(t for t in request.tools if t.name not in withheld)
    if not kept and choice == "required":
        raise ProxyHTTPError(
            ErrorKind.BAD_REQUEST,
            f"tool_choice is required, but this proxy's policy denies every tool sent "
            f"({sorted(withheld)})",
            code="tool_denied",
            param="tool_choice",
        )
    if not kept:  # nothing left to call: a plain chat request (no dangling tool_choice)
        return msgspec.structs.replace(request, tools=(), tool_choice=None), withheld
    return msgspec.structs.replace(request, tools=kept), withheld

"""Tool calls written as XML-ish markup, in the shapes small models actually produce.

- Qwen-Coder: ``<function=NAME><parameter=K>V</parameter></function>`` (values are raw strings)
- name in an attribute: ``<function name="find_member" arguments='{"member_name": "..."}'/>``,
  ``<invoke name="X"><parameter name="k">v</parameter></invoke>``,
  ``<call function="X"><arguments><property name="k">v</property></arguments></call>``
- name in an element: ``<function-name>X</function-name><arguments>{...}</arguments>``,
  ``<function><name>X</name><arguments>{...}</arguments></function>``
- the tool's own name as the tag: ``<diagnose diagnosis="..." action="..."/>``,
  ``<diagnose><diagnosis>...</diagnosis></diagnose>`` (only for known tool names)

Each reader gets the text and the index of the ``<`` and returns an :class:`XmlCall`, or None
when the markup there is not a call (a tool *definition* echoed back is not a call).
"""

from __future__ import annotations

import html
import re
from typing import Any, NamedTuple

from forge_rt.core._jsonschema import ARGUMENT_KEYS, NAME_KEYS
from forge_rt.guardrails._json_repair import JsonRepairError, loads_lenient

__all__ = [
    "XmlCall",
    "read_attr_call",
    "read_element_call",
    "read_function_name_call",
    "read_named_tag_call",
    "read_qwen_coder_call",
]

_ATTR = re.compile(r"""\s*([\w:.\-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_TAG_END = re.compile(r"\s*(/?)>")
_QWEN_PARAM = re.compile(r"<parameter=([^>\n]{1,128})>")
_QWEN_STOP = re.compile(r"</parameter>|<parameter=|</function>|</tool_call>")
_NAMED_PARAM = re.compile(
    r"""<(parameter|property|param|arg|argument)\s+name\s*=\s*(?:"([^"]*)"|'([^']*)')\s*(/?)>"""
)
_SIMPLE_CHILD = re.compile(r"<([A-Za-z_][\w\-]*)\s*(/?)>")
# Elements and attributes that hold a call's arguments are spelled like the JSON keys.
_ARGS_BLOCK = re.compile(rf"<({'|'.join(ARGUMENT_KEYS)})\s*>")
_ARGS_AFTER_NAME = re.compile(rf"\s*<({'|'.join(ARGUMENT_KEYS)})\s*>")
_SKIP_ATTRS = frozenset({*NAME_KEYS, "id", "type", "call_id"})


class XmlCall(NamedTuple):
    """One call read from markup; ``args`` is None when they were present but unreadable."""

    end: int
    name: str
    args: dict[str, Any] | None
    raw: str


def _attributes(text: str, pos: int, stop: int) -> tuple[dict[str, str], int, bool] | None:
    """Attributes from ``pos`` to the end of the open tag: (attrs, index after '>', self-closing)."""
    attrs: dict[str, str] = {}
    while True:
        m = _ATTR.match(text, pos, stop)
        if m is None:
            break
        value = m.group(2) if m.group(2) is not None else m.group(3)
        attrs[m.group(1)] = html.unescape(value)
        pos = m.end()
    end = _TAG_END.match(text, pos, stop)
    if end is None:
        return None
    return attrs, end.end(), end.group(1) == "/"


def _json_args(raw: str) -> dict[str, Any] | None:
    stripped = raw.strip()
    if not stripped:
        return {}
    try:
        value = loads_lenient(stripped)
    except JsonRepairError:
        return None
    return value if isinstance(value, dict) else None


def _strip_newline(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def read_qwen_coder_call(text: str, pos: int, stop: int) -> XmlCall | None:
    """``<function=NAME>`` at ``pos``: parameters up to ``</function>`` (or the region's end)."""
    close = text.find(">", pos, min(stop, pos + 200))
    if close < 0:
        return None
    name = text[pos + len("<function=") : close].strip()
    if not name or "<" in name or "\n" in name:
        return None
    body_start = close + 1
    end_tag = text.find("</function>", body_start, stop)
    body_end = end_tag if end_tag >= 0 else stop
    after = end_tag + len("</function>") if end_tag >= 0 else stop
    args: dict[str, Any] = {}
    cursor = body_start
    found_param = False
    while True:
        m = _QWEN_PARAM.search(text, cursor, body_end)
        if m is None:
            break
        found_param = True
        value_start = m.end()
        stop_m = _QWEN_STOP.search(text, value_start, body_end)
        value_end = stop_m.start() if stop_m is not None else body_end
        args[m.group(1).strip()] = _strip_newline(text[value_start:value_end])
        cursor = value_end
        if stop_m is not None and stop_m.group() == "</parameter>":
            cursor = stop_m.end()
    if not found_param:
        body = text[body_start:body_end]
        parsed = _json_args(body)
        return XmlCall(after, name, parsed, text[pos:after])
    return XmlCall(after, name, args, text[pos:after])


def _named_params(body: str) -> dict[str, Any] | None:
    """``<parameter name="k">v</parameter>`` children (any of the usual element names)."""
    out: dict[str, Any] = {}
    cursor = 0
    while True:
        m = _NAMED_PARAM.search(body, cursor)
        if m is None:
            return out or None
        key = m.group(2) if m.group(2) is not None else m.group(3)
        if m.group(4) == "/":
            out[key] = ""
            cursor = m.end()
            continue
        close = f"</{m.group(1)}>"
        end = body.find(close, m.end())
        if end < 0:
            return None
        out[key] = body[m.end() : end].strip()
        cursor = end + len(close)


def _simple_children(body: str) -> dict[str, Any] | None:
    """``<k>v</k>`` children with text content; None if the body holds anything else."""
    out: dict[str, Any] = {}
    cursor = 0
    while True:
        m = _SIMPLE_CHILD.search(body, cursor)
        if m is None:
            rest = body[cursor:].strip()
            return out if out and not rest else None
        if body[cursor : m.start()].strip():
            return None
        key = m.group(1)
        if m.group(2) == "/":
            out[key] = ""
            cursor = m.end()
            continue
        close = f"</{key}>"
        end = body.find(close, m.end())
        if end < 0:
            return None
        out[key] = body[m.end() : end].strip()
        cursor = end + len(close)


def _body_args(body: str) -> dict[str, Any] | None:
    """Arguments from an element body: named parameters, an arguments block, JSON, or children."""
    if not body.strip():
        return {}
    block = _ARGS_BLOCK.search(body)
    if block is not None:
        close = body.find(f"</{block.group(1)}>", block.end())
        inner = body[block.end() : close if close >= 0 else len(body)]
        named = _named_params(inner)
        if named is not None:
            return named
        if inner.lstrip().startswith(("{", "[")):
            return _json_args(inner)
        return _simple_children(inner) if inner.strip() else {}
    named = _named_params(body)
    if named is not None:
        return named
    if body.lstrip().startswith("{"):
        return _json_args(body)
    return _simple_children(body)


def _element_body(text: str, tag: str, start: int, stop: int) -> tuple[str, int] | None:
    close = f"</{tag}>"
    end = text.find(close, start, stop)
    if end < 0:
        return None
    return text[start:end], end + len(close)


def read_attr_call(text: str, pos: int, stop: int, tag: str) -> XmlCall | None:
    """``<TAG name="X" ...>`` (TAG one of function/invoke/call/tool/...) at ``pos``."""
    parsed = _attributes(text, pos + 1 + len(tag), stop)
    if parsed is None:
        return None
    attrs, after_open, closed = parsed
    name = next((attrs[k] for k in NAME_KEYS if k in attrs), None)
    if not name:
        return None
    if "description" in attrs:
        return None  # a tool definition echoed back
    args_key = next((k for k in ARGUMENT_KEYS if k in attrs), None)
    if closed:
        end = after_open
        if args_key is not None:
            return XmlCall(end, name, _json_args(attrs[args_key]), text[pos:end])
        extra = {k: v for k, v in attrs.items() if k not in _SKIP_ATTRS}
        return XmlCall(end, name, extra, text[pos:end])
    element = _element_body(text, tag, after_open, stop)
    if element is None:
        return None
    body, end = element
    if "<description>" in body:
        return None
    if args_key is not None:
        return XmlCall(end, name, _json_args(attrs[args_key]), text[pos:end])
    return XmlCall(end, name, _body_args(body), text[pos:end])


def read_function_name_call(text: str, pos: int, stop: int) -> XmlCall | None:
    """``<function-name>X</function-name>`` then an optional ``<arguments>`` block."""
    start = pos + len("<function-name>")
    close = text.find("</function-name>", start, min(stop, start + 200))
    if close < 0:
        return None
    name = text[start:close].strip()
    if not name:
        return None
    end = close + len("</function-name>")
    m = _ARGS_AFTER_NAME.match(text, end, stop)
    if m is None:
        return XmlCall(end, name, {}, text[pos:end])
    element = _element_body(text, m.group(1), m.end(), stop)
    if element is None:
        return None
    body, end = element
    args = _json_args(body) if body.lstrip().startswith("{") else _body_args(body)
    return XmlCall(end, name, args, text[pos:end])


_NAME_ELEMENT = re.compile(r"<function>\s*<name>([^<]{1,128})</name>")


def read_element_call(text: str, pos: int, stop: int) -> XmlCall | None:
    """``<function><name>X</name>...</function>``; a body with ``<description>`` is an echo."""
    m = _NAME_ELEMENT.match(text, pos, stop)
    if m is None:
        return None
    element = _element_body(text, "function", m.end(), stop)
    if element is None:
        return None
    body, end = element
    if "<description>" in body:
        return None
    return XmlCall(end, m.group(1).strip(), _body_args(body), text[pos:end])


def read_named_tag_call(text: str, pos: int, stop: int, tag: str) -> XmlCall | None:
    """``<TOOL a="1"/>`` or ``<TOOL><a>1</a></TOOL>`` where TOOL is a known tool's name."""
    parsed = _attributes(text, pos + 1 + len(tag), stop)
    if parsed is None:
        return None
    attrs, after_open, closed = parsed
    if closed:
        return XmlCall(after_open, tag, dict(attrs), text[pos:after_open])
    element = _element_body(text, tag, after_open, stop)
    if element is None:
        return None
    body, end = element
    args = _body_args(body)
    if args is None:
        return None
    return XmlCall(end, tag, {**attrs, **args}, text[pos:end])

"""Tool calls written as Python: ``load_ledger(3, 2031)``, ``report(findings="...")``.

Code-trained models answer in a ```python block, on a line of their own, or after Llama's
``<|python_tag|>``. Only literal arguments are accepted (strings, numbers, booleans, None, lists,
dicts, and ``"a" + "b"`` concatenation), read with :mod:`ast` -- nothing is ever evaluated.
A call whose arguments are variables is code the model is explaining, not a call.
"""

from __future__ import annotations

import ast
import re
from typing import Any

__all__ = ["PythonCall", "call_end", "parse_call_args"]

_TRIPLE_DOUBLE = r'"""(?:[^"\\]|\\.|"(?!""))*"""'
_TRIPLE_SINGLE = r"'''(?:[^'\\]|\\.|'(?!''))*'''"
_DOUBLE = r'"(?:[^"\\\n]|\\.)*"'
_SINGLE = r"'(?:[^'\\\n]|\\.)*'"
_ANY_STRING = f"{_TRIPLE_DOUBLE}|{_TRIPLE_SINGLE}|{_DOUBLE}|{_SINGLE}"
# A string (any quoting), a bracket, or a quote that opens no complete string (unterminated).
_PY_TOKEN = re.compile(f"{_ANY_STRING}|[()\\[\\]{{}}]|[\"']", re.S)
_STRINGS = re.compile(_ANY_STRING, re.S)
_MAX_NESTING = 32
# ast.parse recurses per operator; literal calls need few, so bound the code before parsing it.
_OPERATORS = re.compile(r"[-+*/%@&|^~<>=!]|\bnot\b|\blambda\b")
_MAX_CODE = 2048
_MAX_OPERATORS = 64
_NAMES: dict[str, Any] = {"true": True, "false": False, "null": None}


class PythonCall:
    """Positional and keyword arguments of one call, as plain Python values."""

    __slots__ = ("keywords", "positional")

    def __init__(self, positional: list[Any], keywords: dict[str, Any]) -> None:
        self.positional = positional
        self.keywords = keywords


def call_end(text: str, open_paren: int, stop: int) -> int:
    """Index just past the ``)`` closing the ``(`` at ``open_paren``; -1 if none before ``stop``."""
    depth = 0
    pos = open_paren
    while True:
        m = _PY_TOKEN.search(text, pos, stop)
        if m is None:
            return -1
        token = m.group()
        pos = m.end()
        if len(token) > 1 and token[0] in "\"'":
            continue  # a complete string literal
        if token in "([{":
            depth += 1
            if depth > _MAX_NESTING:
                return -1
        elif token in ")]}":
            depth -= 1
            if depth == 0:
                return pos if token == ")" else -1
        else:
            return -1  # a quote that opens no complete string


class _NotLiteral(Exception):
    """An argument is an expression, not a literal: the text is code, not a call."""


def _literal(node: ast.expr) -> Any:
    """The plain value ``node`` writes; raises :class:`_NotLiteral` for anything that would
    need evaluating (a variable, a call, arithmetic)."""
    if isinstance(node, ast.Constant):
        return _constant(node)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return _dict_literal(node)
    if isinstance(node, ast.UnaryOp):
        return _signed_literal(node)
    if isinstance(node, ast.BinOp):
        return _joined_literal(node)
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    raise _NotLiteral


def _constant(node: ast.Constant) -> Any:
    """A string, number, boolean or None; bytes, ``...`` and complex numbers are no JSON."""
    if isinstance(node.value, str | int | float | bool) or node.value is None:
        return node.value
    raise _NotLiteral


def _dict_literal(node: ast.Dict) -> dict[str, Any]:
    """A dict with string keys; ``**spread`` and other keys are no JSON object."""
    out: dict[str, Any] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if key is None:
            raise _NotLiteral
        name = _literal(key)
        if not isinstance(name, str):
            raise _NotLiteral
        out[name] = _literal(value)
    return out


def _signed_literal(node: ast.UnaryOp) -> Any:
    """A number with a sign (``-3``): Python parses the sign as an operator on the number."""
    if not isinstance(node.op, ast.USub | ast.UAdd):
        raise _NotLiteral
    operand = _literal(node.operand)
    if isinstance(operand, int | float) and not isinstance(operand, bool):
        return -operand if isinstance(node.op, ast.USub) else operand
    raise _NotLiteral


def _joined_literal(node: ast.BinOp) -> str:
    """``"a" + "b"``: a long string split across lines, which models write as in code."""
    if not isinstance(node.op, ast.Add):
        raise _NotLiteral
    left, right = _literal(node.left), _literal(node.right)
    if isinstance(left, str) and isinstance(right, str):
        return left + right
    raise _NotLiteral


def parse_call_args(source: str) -> PythonCall | None:
    """The literal arguments of ``source`` (``"(...)"``, parentheses included), or None."""
    code = _STRINGS.sub('""', source)
    if len(code) > _MAX_CODE or len(_OPERATORS.findall(code)) > _MAX_OPERATORS:
        return None
    try:
        tree = ast.parse("f" + source, mode="eval")
    except (SyntaxError, ValueError):
        # ValueError: the text holds a NUL byte. Either way it is not Python.
        return None
    call = tree.body
    if not isinstance(call, ast.Call):
        return None
    try:
        positional = [_literal(a) for a in call.args]
        keywords: dict[str, Any] = {}
        for kw in call.keywords:
            if kw.arg is None:
                return None
            keywords[kw.arg] = _literal(kw.value)
    except _NotLiteral:
        return None
    return PythonCall(positional, keywords)

"""A Griffe extension for the API reference (mkdocs.yml): reST's roles become Markdown code.

forge_rt's docstrings are Markdown-ish prose that borrows two reST habits: roles that name an
object (:class:`SqliteStore`, :meth:`Policy.loads`, :func:`~forge_rt.trace.replay`) and a
paragraph ending in ``::`` before an indented example. Rendered as Markdown the role's name shows
as text (":class:"), so each role becomes a code span with the name a reader types (a leading
``~`` keeps the last part, as in Sphinx) and ``::`` becomes ``:``. The indented example is already
a Markdown code block. Only the site's copy changes; the source is left as it is.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|meth|func|attr|data|mod|exc|obj):`(~?)([^`]+)`")
_LITERAL = re.compile(r"(?<=\S)::$", re.M)  # "... as follows::" -> "... as follows:"
_LITERAL_ALONE = re.compile(r"^\s*::\s*$", re.M)  # a lone "::" line goes


def _code(match: re.Match[str]) -> str:
    tilde, name = match.groups()
    return f"`{name.rsplit('.', 1)[-1] if tilde else name}`"


def markdown_of(text: str) -> str:
    """The docstring with its roles as code spans and its literal-block markers as colons."""
    text = _ROLE.sub(_code, text)
    text = _LITERAL.sub(":", text)
    return _LITERAL_ALONE.sub("", text)


class SphinxRoles(griffe.Extension):
    """Rewrites each loaded object's docstring with :func:`markdown_of`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_of(obj.docstring.value)

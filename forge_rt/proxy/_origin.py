"""Who may drive the proxy from where: the Host allowlist, cross-origin refusal, JSON bodies.

A proxy on 127.0.0.1 without keys is reachable by every web page its user opens: a page can
POST a ``text/plain`` "simple request" (no CORS preflight) straight to the local model, and a
DNS-rebinding page reaches it under its own host name. Three checks close that, before auth and
before a body is read:

- **Host allowlist.** The ``Host`` header must name the proxy: the loopback names, the address
  it is bound to, or a name given with ``--allowed-host`` (``*`` allows any). A rebinding page's
  requests carry the attacker's host name and are refused.
- **Cross-origin requests are refused** unless their ``Origin`` is a configured CORS origin, or
  the proxy's own (same origin). Non-browser clients send no ``Origin`` and are not affected.
- **POST bodies must be declared JSON** (``application/json``, any parameters): a browser cannot
  send that cross-origin without a preflight, which the proxy answers only for CORS origins.

Each refusal is a :class:`~forge_rt.proxy._errors.ProxyHTTPError` (403, or 415 for the content
type) in the called API's shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from forge_rt.proxy._asgi import Scope, header
from forge_rt.proxy._errors import ErrorKind, ProxyHTTPError

__all__ = ["LOOPBACK_NAMES", "OriginGuard"]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})


def host_name(value: str) -> str:
    """The host of a ``Host`` header value or of an origin's netloc, port and brackets gone."""
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:8081
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


class OriginGuard:
    """The three checks above, for a proxy bound to ``bind_host``."""

    def __init__(
        self, *, bind_host: str, allowed_hosts: Sequence[str], cors_origins: Sequence[str]
    ) -> None:
        names = set(LOOPBACK_NAMES) | {host_name(h) for h in allowed_hosts if h != "*"}
        if bind_host not in _WILDCARD_BINDS:
            names.add(host_name(bind_host))
        self._any_host = "*" in allowed_hosts
        self._hosts = frozenset(names)
        self._cors = frozenset(o.rstrip("/").lower() for o in cors_origins)

    @property
    def allowed_hosts(self) -> frozenset[str]:
        return self._hosts

    def check(self, scope: Scope) -> None:
        """Raise a 403 or 415 :class:`ProxyHTTPError` for a request refused by these rules."""
        host = header(scope, b"host")
        if host is not None and not self._any_host:
            name = host_name(host.decode("latin-1"))
            if name not in self._hosts:
                raise ProxyHTTPError(
                    ErrorKind.FORBIDDEN,
                    f"Host {name!r} is not one this proxy answers to (allowed: "
                    f"{', '.join(sorted(self._hosts))}); start it with --allowed-host {name} "
                    "if that name is really yours",
                    code="host_not_allowed",
                )
        origin = header(scope, b"origin")
        if origin is not None and not self._origin_allowed(origin.decode("latin-1"), host):
            raise ProxyHTTPError(
                ErrorKind.FORBIDDEN,
                f"cross-origin request from {origin.decode('latin-1')!r} refused: a web page "
                "may drive this proxy only from an origin given with --cors-origin",
                code="origin_not_allowed",
            )
        if scope["method"] == "POST":
            kind = header(scope, b"content-type") or b""
            media = kind.split(b";", 1)[0].strip().lower()
            if media != b"application/json":
                raise ProxyHTTPError(
                    ErrorKind.UNSUPPORTED_MEDIA,
                    f"the body must be sent as application/json, not "
                    f"{media.decode('latin-1') or '(no content-type)'!r}",
                    code="unsupported_media_type",
                )

    def _origin_allowed(self, origin: str, host: bytes | None) -> bool:
        text = origin.rstrip("/").lower()
        if "*" in self._cors or text in self._cors:
            return True
        # Same origin: the page was served from the proxy's own address.
        netloc = urlsplit(text).netloc
        return host is not None and netloc == host.decode("latin-1").strip().lower()

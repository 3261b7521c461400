"""Redaction of everything retrymw writes as text: URLs in logs, spans, notes and CLI output."""

from __future__ import annotations

__all__ = ["redact_url"]


def redact_url(url: str) -> str:
    """Return ``url`` fit for the ``url.full`` attribute: no userinfo, query or fragment.

    Credentials and query strings (tokens, signatures, ids) never reach telemetry. The function
    works on the text alone and never raises.

    >>> redact_url("https://user:secret@example.com:8443/a/b?token=x#top")
    'https://example.com:8443/a/b'
    """
    url = url.split("#", 1)[0].split("?", 1)[0]
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"

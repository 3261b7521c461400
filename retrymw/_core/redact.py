"""Everything retrymw writes as text goes through here: redacted, and safe to compute.

Two concerns meet in this module because every writer (log lines, span attributes and events,
PEP 678 notes, CLI output) needs both:

- **Redaction**, following the OpenTelemetry convention for ``url.full``: the userinfo of a URL
  becomes ``REDACTED:REDACTED`` and the *values* of sensitive query parameters become
  ``REDACTED``; the scheme, host, port, path and the other parameters stay readable.
- **Safety**: formatting a user's object (an exception whose ``__str__`` raises, a value with a
  huge ``repr``) never raises and never produces unbounded text.

The sensitive query keys, compared case-insensitively after percent-decoding, are OpenTelemetry's
list (``AWSAccessKeyId``, ``Signature``, ``sig``, ``X-Goog-Signature``) extended with common
credential names (see `SENSITIVE_QUERY_KEYS`), plus any key that contains ``token``,
``secret``, ``password``, ``passwd``, ``signature``, ``credential``, ``apikey``, ``api_key``,
``api-key`` or ``auth``, or ends in ``_key``/``-key``. Secrets elsewhere in a path
(``/reset/<token>``) cannot be told apart from ids and are not redacted.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

__all__ = [
    "REDACTED",
    "SENSITIVE_QUERY_KEYS",
    "exception_text",
    "redact_text",
    "redact_url",
    "safe_repr",
    "safe_str",
]

#: What replaces a credential or a sensitive value (OpenTelemetry's spelling).
REDACTED = "REDACTED"

#: Query keys whose values are always redacted (lower case; compared case-insensitively).
#: The first four are OpenTelemetry's default list, the rest common credential names.
SENSITIVE_QUERY_KEYS = frozenset(
    {
        "awsaccesskeyid",
        "signature",
        "sig",
        "x-goog-signature",
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "api_key",
        "apikey",
        "key",
        "password",
        "passwd",
        "pwd",
        "secret",
        "client_secret",
        "code",
        "auth",
        "session",
        "jwt",
    }
)

# A key containing any of these is sensitive too ("my_api_token", "X-Auth-Key", "db_password").
_SENSITIVE_PARTS = (
    "token",
    "secret",
    "password",
    "passwd",
    "signature",
    "credential",
    "apikey",
    "api_key",
    "api-key",
    "auth",
)

# A URL inside free text: a scheme, "://", then anything up to whitespace, a quote or a bracket
# (httpx writes "for url 'https://...'", reprs write "<Request('GET', 'https://...')>").
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
# A query parameter outside a full URL ("/path?token=x", "&sig=y"): the key and its value.
_PARAM_IN_TEXT = re.compile(r"(?<=[?&;])([^\s=&;#'\"<>`]+)=([^\s&;#'\"<>`]*)")


def _is_sensitive(key: str) -> bool:
    try:
        name = unquote_plus(key).strip().lower()
    except Exception:  # pragma: no cover - unquote_plus accepts any str; never trust that
        name = key.lower()
    return (
        name in SENSITIVE_QUERY_KEYS
        or name.endswith(("_key", "-key"))
        or any(part in name for part in _SENSITIVE_PARTS)
    )


def _redact_params(params: str) -> str:
    """Redact the values of sensitive ``key=value`` pairs in a query string or fragment."""
    if "=" not in params:
        return params
    pieces = []
    for piece in params.split("&"):
        key, equals, value = piece.partition("=")
        sensitive = equals and value and _is_sensitive(key)
        pieces.append(f"{key}={REDACTED}" if sensitive else piece)
    return "&".join(pieces)


def redact_url(url: str) -> str:
    """Return ``url`` fit for telemetry: credentials and sensitive query values redacted.

    Follows the OpenTelemetry convention for ``url.full``: any userinfo becomes
    ``REDACTED:REDACTED`` (whether or not it had a password), and the value of every sensitive
    query parameter (see the module documentation) becomes ``REDACTED``; the other parameters,
    the path and the fragment's other parameters stay as they were. The function works on the
    text alone and never raises.

    >>> redact_url("https://user:secret@example.com:8443/a/b?token=x&page=2#top")
    'https://REDACTED:REDACTED@example.com:8443/a/b?token=REDACTED&page=2#top'
    """
    if "@" not in url and "?" not in url and "#" not in url:
        return url  # no userinfo, query or fragment: nothing to redact (every HTTP attempt asks)
    url, hash_mark, fragment = url.partition("#")
    url, question_mark, query = url.partition("?")
    scheme, separator, rest = url.partition("://")
    if separator:
        authority, slash, path = rest.partition("/")
        # The host follows the last "@": a password may contain "@", a host cannot.
        _userinfo, at, host = authority.rpartition("@")
        if at:
            authority = f"{REDACTED}:{REDACTED}@{host}"
        url = f"{scheme}://{authority}{slash}{path}"
    if question_mark:
        url = f"{url}?{_redact_params(query)}"
    if hash_mark:
        # OAuth's implicit flow puts tokens in the fragment ("#access_token=...").
        url = f"{url}#{_redact_params(fragment)}"
    return url


def redact_text(text: str) -> str:
    """Redact every URL inside ``text`` (an exception message, a traceback) with `redact_url`.

    Query parameters outside a full URL (``"/path?token=x"``) have their sensitive values
    redacted too. Never raises.

    >>> redact_text("Server error '503' for url 'https://u:p@api.test/x?sig=abc&q=1'")
    "Server error '503' for url 'https://REDACTED:REDACTED@api.test/x?sig=REDACTED&q=1'"
    """
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda match: redact_url(match.group()), text)
    if "=" in text:
        text = _PARAM_IN_TEXT.sub(_redact_param_match, text)
    return text


def _redact_param_match(match: re.Match[str]) -> str:
    key, value = match.group(1), match.group(2)
    if value and value != REDACTED and _is_sensitive(key):
        return f"{key}={REDACTED}"
    return match.group()


def _type_name(value: object) -> str:
    try:
        return str(type(value).__qualname__)
    except Exception:  # a hostile metaclass; nothing more can be said about it
        return "object"


def safe_str(value: object) -> str:
    """``str(value)``, or ``<TypeName>`` when that raises (a hostile ``__str__``)."""
    try:
        return str(value)
    except Exception:
        return f"<{_type_name(value)}>"


def safe_repr(value: object, limit: int = 200) -> str:
    """``repr(value)`` redacted and cut to ``limit`` characters; ``<TypeName>`` if it raises."""
    try:
        text = repr(value)
    except Exception:
        return f"<{_type_name(value)}>"
    return _truncate(redact_text(text), limit)


def exception_text(error: BaseException, limit: int | None = None) -> str:
    """The message of ``error`` as retrymw writes it: safe, redacted, at most ``limit`` chars.

    Redaction comes before the cut, so that a URL cut short never escapes it.
    """
    text = redact_text(safe_str(error))
    return text if limit is None else _truncate(text, limit)


def _truncate(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + "…"

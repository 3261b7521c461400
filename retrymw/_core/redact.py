"""Everything retrymw writes as text goes through here: redacted, and safe to compute.

Two concerns meet in this module because every writer (log lines, span attributes and events,
PEP 678 notes, CLI output) needs both:

- **Redaction**, following the OpenTelemetry convention for ``url.full``: the userinfo of a URL
  becomes ``REDACTED:REDACTED`` and the *values* of sensitive query parameters become
  ``REDACTED``; the scheme, host, port, path and the other parameters stay readable. The
  userinfo runs to a URL's last ``@``, so that a password written without percent-encoding
  (``redis://u:p#ss?w/rd@host``) is redacted whole, where RFC 3986 would end it at ``#``.
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

# A scheme and its "://" (RFC 3986: a letter, then letters, digits, "+", "-" or "."), group 1.
# The match starts where a run of scheme characters starts, so that a long run that is no
# scheme costs one try, not one per character.
_SCHEME = re.compile(r"(?<![A-Za-z0-9+.-])[0-9+.-]*([A-Za-z][A-Za-z0-9+.-]*)://")
# What may come before "://" for a text to be an absolute URL (leading blanks tolerated).
_SCHEME_NAME = re.compile(r"\s*([A-Za-z][A-Za-z0-9+.-]*)")
_ABSOLUTE_URL = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*://")
# Schemes whose paths and queries often hold "@" (/@alice, ?email=a@b.test): after a well-formed
# host, an "@" of theirs is part of the path, not the end of a userinfo.
_WEB_SCHEMES = frozenset({"http", "https", "ws", "wss"})
# A host (a name, IPv4 or [IPv6]) and an optional port: a web authority without userinfo.
_HOST_AND_PORT = re.compile(r"(?:\[[0-9A-Za-z:.%_~-]*\]|[0-9A-Za-z._~%-]*)(?::[0-9]*)?")
# Where RFC 3986 ends an authority; in free text, a quote or a bracket ends it too.
_AUTHORITY_END = re.compile(r"[/?#]")
_AUTHORITY_END_IN_TEXT = re.compile(r"[/?#'\"<>`]")
# Where a URL inside free text ends, after its userinfo: a blank, a quote or a bracket (httpx
# writes "for url 'https://...'", reprs write "<Request('GET', 'https://...')>").
_URL_END = re.compile(r"[\s'\"<>`]")
_BLANK = re.compile(r"\s")
# A query parameter outside a full URL ("/path?token=x", "&sig=y"): the key and its value. The
# key holds no "?", so that a run of "?" costs one step per character.
_PARAM_IN_TEXT = re.compile(r"(?<=[?&;])([^\s=&;#?'\"<>`]+)=([^\s&;#'\"<>`]*)")


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
    text alone, takes all of it for one URL (blanks included) and never raises.

    The userinfo ends at the URL's *last* ``@``, not where RFC 3986 ends the authority: a
    password written without percent-encoding may hold ``#``, ``?`` or ``/`` (and ``@``), which
    would otherwise leave the rest of it in the "path", "query" or "fragment". Only http(s) and
    ws(s) URLs, whose paths and queries carry ``@`` (``/@alice``, ``?email=a@b.test``), keep the
    RFC's reading when their authority is a well-formed ``host[:port]``.

    >>> redact_url("https://user:secret@example.com:8443/a/b?token=x&page=2#top")
    'https://REDACTED:REDACTED@example.com:8443/a/b?token=REDACTED&page=2#top'
    >>> redact_url("redis://user:p#ss?w/rd@127.0.0.1:6379/0")
    'redis://REDACTED:REDACTED@127.0.0.1:6379/0'
    """
    if "@" not in url and "?" not in url and "#" not in url:
        return url  # no userinfo, query or fragment: nothing to redact (every HTTP attempt asks)
    prefix, separator, rest = url.partition("://")
    scheme = _SCHEME_NAME.fullmatch(prefix) if separator else None
    if scheme is None:  # a relative URL, or not a URL: only its query and fragment
        return _redact_query_and_fragment(url)
    authority = rest[: _end_of(_AUTHORITY_END, rest, 0, len(rest))]
    at = _userinfo_end(scheme.group(1), authority, rest.rfind("@"))
    return _rebuild(f"{prefix}://", rest, at)


def redact_text(text: str) -> str:
    """Redact every URL inside ``text`` (an exception message, a traceback) like `redact_url`.

    Inside text a URL ends at a blank: its userinfo runs to the last ``@`` before the blank (a
    password may hold quotes, ``#``, ``?``, ``/`` and ``@``), the rest of it to a blank, a
    quote or a bracket. A password holding a blank is redacted only by `redact_url`, which is
    given the whole URL. Query parameters outside a full URL (``"/path?token=x"``) have their
    sensitive values redacted too. Linear in the length of ``text``; never raises.

    >>> redact_text("Server error '503' for url 'https://u:p@api.test/x?sig=abc&q=1'")
    "Server error '503' for url 'https://REDACTED:REDACTED@api.test/x?sig=REDACTED&q=1'"
    """
    if "://" in text:
        text = _redact_urls_in(text)
    if "=" in text:
        text = _PARAM_IN_TEXT.sub(_redact_param_match, text)
    return text


def _redact_urls_in(text: str) -> str:
    """`redact_text`'s first pass: each URL in ``text``, found from its scheme, redacted."""
    pieces = []
    done = 0  # text[:done] is in pieces
    # The blank-free run of text the latest URL began in, and the last "@" in it: every URL of
    # the run shares them, so that a run of many URLs is scanned once.
    run_end = last_at = -1
    for match in _SCHEME.finditer(text):
        start, body = match.start(1), match.end()
        if start < done:  # inside a URL already redacted (a scheme in its query, say)
            continue
        if body > run_end:
            run_end = _end_of(_BLANK, text, body, len(text))
            last_at = text.rfind("@", body, run_end)
        authority_end = _end_of(_AUTHORITY_END_IN_TEXT, text, body, run_end)
        at = _userinfo_end(
            match.group(1),
            text[body:authority_end],
            last_at - body if last_at >= body else -1,
        )
        end = _end_of(_URL_END, text, body + at + 1, len(text))
        pieces.append(text[done:start])
        pieces.append(_rebuild(text[start:body], text[body:end], at))
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _end_of(delimiter: re.Pattern[str], text: str, start: int, end: int) -> int:
    """Where the first ``delimiter`` in ``text[start:end]`` is; ``end`` without one."""
    found = delimiter.search(text, start, end)
    return end if found is None else found.start()


def _userinfo_end(scheme: str, authority: str, last_at: int) -> int:
    """Where a URL's userinfo ends: the index of its ``@`` after ``scheme://``; -1 for none.

    Args:
        scheme: the URL's scheme.
        authority: the URL after ``scheme://`` up to where RFC 3986 ends the authority.
        last_at: the index of the URL's last ``@`` (same origin), or -1.
    """
    if last_at < len(authority) or scheme.lower() not in _WEB_SCHEMES:
        return last_at  # every "@" is in the authority, or "@" has no business after it
    if "@" in authority:
        return authority.rfind("@")  # RFC 3986's userinfo; the later "@" are in the path
    return -1 if _HOST_AND_PORT.fullmatch(authority) else last_at


def _rebuild(head: str, rest: str, at: int) -> str:
    """``head`` (``scheme://``) and ``rest``, whose userinfo ends at ``at`` (-1: none), redacted."""
    if at >= 0:
        head = f"{head}{REDACTED}:{REDACTED}@"
    return head + _redact_query_and_fragment(rest[at + 1 :])


def _redact_query_and_fragment(url: str) -> str:
    """``url`` with the sensitive values of its query and fragment redacted."""
    url, hash_mark, fragment = url.partition("#")
    url, question_mark, query = url.partition("?")
    if question_mark:
        url = f"{url}?{_redact_params(query)}"
    if hash_mark:
        # OAuth's implicit flow puts tokens in the fragment ("#access_token=...").
        url = f"{url}#{_redact_params(fragment)}"
    return url


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
    """``repr(value)`` redacted and cut to ``limit`` characters; ``<TypeName>`` if it raises.

    A string is redacted before its ``repr``, and one that starts with ``scheme://`` is taken
    whole for one URL (`redact_url`): a configuration value such as a Redis URL loses its
    password whatever characters (blanks, quotes, newlines) the password holds.
    """
    try:
        if isinstance(value, str):
            is_url = _ABSOLUTE_URL.match(value) is not None
            text = repr(redact_url(value) if is_url else redact_text(value))
        else:
            text = redact_text(repr(value))
    except Exception:
        return f"<{_type_name(value)}>"
    return _truncate(text, limit)


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

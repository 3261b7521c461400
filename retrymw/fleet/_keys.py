"""The fleet's store keys: injective, and every key of a namespace in one Redis Cluster slot.

A key is ``retrymw:{<namespace>}:<kind>:<owner>:<target>``, each part percent-encoded
(`encode_part`): every byte outside a small safe set (letters, digits and ``-._~()!$&'*+,;=@``)
becomes ``%XX``, ``%`` itself included, so no part holds a raw ``:``, ``{``, ``}``, space or
newline. Two different (namespace, kind, owner, target) therefore never share a key (namespace
``shop`` with target ``eu:payments`` and namespace ``shop:eu`` with target ``payments``; breakers
``api{v1}`` and ``api(v1)``), and a part can travel inside the synchroniser's space- and
line-separated batch.

The hash tag is the whole encoded namespace: every key of a namespace hashes to one slot, so one
script call per step may touch all of them, on a Redis Cluster too (on the node serving that
slot; the client follows ``MOVED`` there).
"""

from __future__ import annotations

import string

__all__ = ["encode_part", "namespace_prefix"]

_SAFE = frozenset((string.ascii_letters + string.digits + "-._~()!$&'*+,;=@").encode())


def encode_part(text: str) -> str:
    """``text`` percent-encoded (UTF-8) outside the safe set; ``""`` stays ``""``."""
    data = text.encode("utf-8", "surrogatepass")
    if all(byte in _SAFE for byte in data):
        return text
    return "".join(chr(byte) if byte in _SAFE else f"%{byte:02X}" for byte in data)


def namespace_prefix(namespace: str) -> str:
    """The prefix of every key of ``namespace``: ``retrymw:{<encoded namespace>}:``."""
    return f"retrymw:{{{encode_part(namespace)}}}:"

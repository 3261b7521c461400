"""The faces' transports document every argument they take, for their own library.

The arguments are declared by the shells (`retrymw._http.transport`) and documented by one
template per colour that each face fills in; these tests keep the two from drifting apart.
"""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest

import retrymw.httpx
import retrymw.httpx2

FACES = [
    pytest.param(face, name, id=f"{face.__name__}.{name}")
    for face in (retrymw.httpx, retrymw.httpx2)
    for name in ("AsyncRetryTransport", "RetryTransport")
]


@pytest.mark.parametrize(("face", "name"), FACES)
def test_every_argument_is_documented(face: ModuleType, name: str) -> None:
    """help() of each transport lists each of its arguments under ``Args:`` (the sync ones
    through the async twin they refer to), and names no argument it does not take."""
    transport = getattr(face, name)
    taken = list(inspect.signature(transport).parameters)
    asynchronous = face.AsyncRetryTransport
    documented = inspect.getdoc(asynchronous) or ""
    args = documented.split("Args:\n", 1)[1].split("\n\n", 1)[0]
    listed = [line.split(":", 1)[0].strip() for line in args.splitlines() if line[4] != " "]
    if transport is asynchronous:
        assert listed == taken
    else:
        assert [arg for arg in listed if arg != "hedge"] == taken
        assert "but\n``hedge``" in (inspect.getdoc(transport) or "")


@pytest.mark.parametrize(("face", "name"), FACES)
def test_the_docs_name_their_own_library(face: ModuleType, name: str) -> None:
    """Each face's docs name its own library's classes, and the other flavour only as the one
    refused; no template placeholder is left."""
    library = face.__name__.removeprefix("retrymw.")
    text = inspect.getdoc(getattr(face, name)) or ""
    assert "$" not in text
    if name == "AsyncRetryTransport":
        assert f"``{library}.AsyncHTTPTransport()`` by default" in text
        other = "httpx" if library == "httpx2" else "httpx2"
        assert f"a request or transport of {other} (naming both)" in text
    else:
        assert f"for ``{library}.Client``" in text
        assert f"inner ``{library}.HTTPTransport`` (the default)" in text

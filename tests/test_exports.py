"""The public API: every name in __all__ is sorted, importable and presented as retrymw's own."""

from __future__ import annotations

import importlib

import pytest

import retrymw


def test_all_is_sorted_and_unique() -> None:
    """__all__ is sorted case-sensitively and lists each name once."""
    assert retrymw.__all__ == sorted(set(retrymw.__all__))


@pytest.mark.parametrize("name", [pytest.param(name, id=name) for name in retrymw.__all__])
def test_every_public_name_is_exported_from_the_top(name: str) -> None:
    """Each public name resolves on the package and never reports a private module."""
    value = getattr(retrymw, name)
    module = getattr(value, "__module__", "retrymw")
    assert module.startswith("retrymw"), f"{name}.__module__ is {module}"
    assert not any(part.startswith("_") for part in module.split(".")), module


def test_public_classes_defined_in_private_modules_are_all_exported() -> None:
    """No public class of a private module is left out of __all__."""
    missing = []
    for module_name in (
        "_core.backoff",
        "_core.errors",
        "_core.events",
        "_core.matchers",
        "_core.policy",
        "_engine.retrier",
        "_protect.breaker",
        "_protect.budget",
        "_protect.targets",
        "_protect.throttle",
        "_config.loader",
    ):
        module = importlib.import_module(f"retrymw.{module_name}")
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if isinstance(value, type) and not name.startswith("_") and name not in retrymw.__all__:
                missing.append(f"{module_name}.{name}")
    assert missing == []


def test_version_is_read_from_the_installed_metadata() -> None:
    """retrymw.__version__ is the installed distribution's version."""
    from importlib.metadata import version

    assert retrymw.__version__ == version("retrymw")


def test_unknown_attribute_raises_attribute_error() -> None:
    """A misspelt attribute is an AttributeError naming it, not a silent None."""
    with pytest.raises(AttributeError, match="no attribute 'Retryer'"):
        _ = retrymw.Retryer

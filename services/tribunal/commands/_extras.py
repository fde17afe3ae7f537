"""Commands that need an optional extra check for it first and say how to install it."""

from __future__ import annotations

import importlib.util

from ..core import FailedPreconditionError

__all__ = ["require_extra"]


def require_extra(extra: str, modules: tuple[str, ...], *, what: str) -> None:
    """Raise, naming the pip extra, when any of ``modules`` is not installed.

    Raises:
        FailedPreconditionError: a module is missing.
    """
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise FailedPreconditionError(
            f"{what} needs {', '.join(missing)}, which this install lacks: "
            f"pip install 'tribunal[{extra}]'"
        )

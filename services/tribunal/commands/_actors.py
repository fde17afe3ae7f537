"""Who the audit trails name for a change made from the command line."""

from __future__ import annotations

__all__ = ["cli_actor"]


def cli_actor() -> str:
    """``cli:<local user>`` (``cli:uid-<n>`` where the uid has no name: a container)."""
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        import os

        return f"cli:uid-{os.getuid()}"

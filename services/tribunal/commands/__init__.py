"""Subcommands of the ``tribunal`` CLI, one module per area."""

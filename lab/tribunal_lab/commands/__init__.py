"""Subcommands of the ``tribunal-lab`` CLI, one module per area."""

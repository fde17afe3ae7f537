"""``tribunal credentials new|list|remove``: the file of who may call the services.

``new NAME --role query|admin --file credentials.yaml`` makes a random token, prints
it once (give it to the caller) and adds ``{name, role, token_sha256}`` to the file,
which the services re-read on their own: a rotation is ``new`` (the caller switches
to the new token) then ``remove`` of the old name, with no restart and no moment
without a valid credential. ``list`` shows names and roles, never tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from ..core import InvalidArgumentError, NotFoundError
from ..core.server import (
    Role,
    credential_from_entry,
    new_token,
    read_credentials_file,
    token_sha256,
)

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "credentials", help="make, list and remove the credentials the services accept"
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--file",
        type=Path,
        required=True,
        help="the credentials file (server.credentials_file); created when missing",
    )
    new = actions.add_parser("new", parents=[where], help="add a credential; prints its token")
    new.add_argument("name", help="who will use it (shown in logs and the KB change audit)")
    new.add_argument(
        "--role",
        choices=[role.value for role in Role],
        default=Role.QUERY.value,
        help="query: ask (Answer, Search, ...); admin: also change the KB (default query)",
    )
    new.set_defaults(func=_new)
    listing = actions.add_parser("list", parents=[where], help="names and roles (JSON)")
    listing.set_defaults(func=_list)
    remove = actions.add_parser("remove", parents=[where], help="revoke a credential by name")
    remove.add_argument("name")
    remove.set_defaults(func=_remove)


def _entries(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    read_credentials_file(path)  # refuses a file that is not a credentials file, with the reason
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return list(data.get("credentials", []))


def _write(path: Path, entries: list[dict[str, Any]]) -> None:
    """Replace the file in one rename, so a service re-reading it never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (
        "# Tribunal credentials: name, role (query|admin), sha256 of the token.\n"
        "# Managed with `tribunal credentials new|remove`; services re-read it on change.\n"
        + yaml.safe_dump({"credentials": entries}, sort_keys=False)
    )
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _new(args: argparse.Namespace) -> int:
    entries = _entries(args.file)
    if any(entry.get("name") == args.name for entry in entries):
        raise InvalidArgumentError(
            f"{args.file} already has a credential named {args.name!r}; pick another name "
            "(a rotation adds the new credential under a new name, then removes the old one)",
            field="name",
        )
    token = new_token()
    entry = {"name": args.name, "role": args.role, "token_sha256": token_sha256(token)}
    try:
        credential_from_entry(entry)
    except ValueError as exc:
        raise InvalidArgumentError(f"credential {args.name!r}: {exc}", field="name") from None
    _write(args.file, [*entries, entry])
    print(token)
    print(
        f"added {args.role} credential {args.name!r} to {args.file}; the token above is "
        "shown once (the file keeps only its sha256)",
        file=sys.stderr,
    )
    return 0


def _list(args: argparse.Namespace) -> int:
    rows = [{"name": e.get("name"), "role": e.get("role")} for e in _entries(args.file)]
    print(json.dumps(rows, indent=2))
    return 0


def _remove(args: argparse.Namespace) -> int:
    entries = _entries(args.file)
    kept = [entry for entry in entries if entry.get("name") != args.name]
    if len(kept) == len(entries):
        raise NotFoundError(f"{args.file} has no credential named {args.name!r}", field="name")
    if not kept:
        raise InvalidArgumentError(
            f"{args.name!r} is the last credential in {args.file}: an empty file would refuse "
            "every call; add its successor first",
            field="name",
        )
    _write(args.file, kept)
    print(f"removed credential {args.name!r} from {args.file}", file=sys.stderr)
    return 0

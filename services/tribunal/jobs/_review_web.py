"""The review web page and its JSON API (Starlette, served by uvicorn).

``GET /`` is one static page (vanilla JS and CSS inline, no build step);
``POST /api/session`` ``{"key"}`` signs an annotator in with the key
``tribunal review add-annotator NAME`` printed (``GET`` says who is signed in, or
null; ``DELETE`` signs out); ``GET /api/next[?skip=TOKEN,...]`` the annotator's next
item, ``POST /api/vote`` ``{"item", "label", "seconds"}`` records a vote under the
signed-in name (a second vote on the same item is refused, 409), ``GET /api/stats``
queue progress. The page renders every value with ``textContent``, never as HTML,
so a query or quote cannot inject markup; the Content-Security-Policy admits only
the page's own inline script and style (by hash). Attention checks look like any
item here: the API never says which items are checks, nor whether a vote was right
(``tribunal review stats`` does).

The page also lets a signed-in annotator link a gateway query to the KB entry that
answers it: ``GET /api/linkable[?decision=FALLBACK|ACCEPT|ESCALATE|ANY]`` lists recent
``Answer`` decisions (fallen back by default) with their candidates, ``POST /api/link``
``{"audit_id", "entry_id"}`` records the link as pending; an admin approves it as a new
phrasing of the entry (``tribunal kb phrasings approve``).

Requests from elsewhere are refused: a ``Host`` outside the allowlist gets 403 (a
DNS-rebinding page cannot reach the API under its own name), and every API call
must carry the ``X-Tribunal-Review`` header, which a cross-site form or image cannot
send and a cross-site script cannot without a CORS preflight this server never
grants; an ``Origin`` other than the server's own (scheme, host and port) is refused
too. ``Host`` is parsed strictly, and wrong annotator keys are rate-limited per client
and overall (:mod:`._review_guard`). The sign-in cookie is ``HttpOnly`` and
``SameSite=Strict``.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..core import (
    ConfigError,
    ErrorCode,
    FailedPreconditionError,
    InvalidArgumentError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TribunalError,
    UnauthenticatedError,
)
from ..core.server import is_loopback
from ._review import ReviewQueue, item_view
from ._review_annotators import AnnotatorRegistry
from ._review_guard import KeyAttempts, parse_host, same_origin
from ._review_page import HEADERS, PAGE
from ._review_pick import EntrySearch, pick_view, pick_vote, search_query

if TYPE_CHECKING:
    from ..retrieval import PhrasingLinks

__all__ = [
    "CSRF_HEADER",
    "PAGE",
    "SESSION_COOKIE",
    "allowed_hosts_for",
    "create_app",
    "review_server",
]

log = logging.getLogger(__name__)

_STATUS = {
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.FAILED_PRECONDITION: 409,
    ErrorCode.RESOURCE_EXHAUSTED: 429,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.PERMISSION_DENIED: 403,
}

SESSION_COOKIE = "tribunal_review"
"""The sign-in cookie: the annotator's key (HttpOnly, SameSite=Strict)."""
CSRF_HEADER = "X-Tribunal-Review"
"""Every API call carries it; a cross-site request cannot."""
_SIGN_IN = "sign in with your annotator key (`tribunal review add-annotator NAME` prints one)"


def _error(exc: TribunalError) -> JSONResponse:
    status = _STATUS.get(exc.code, 500)
    message = exc.message if status != 500 else "internal error"
    return JSONResponse({"error": message, "field": exc.field}, status_code=status)


def _host_name(value: str) -> str:
    """The host part of a ``Host`` header (``[::1]:8765`` -> ``::1``), lower-case; ""
    for a value that is not exactly ``name[:port]`` (never an allowed name)."""
    parsed = parse_host(value)
    return parsed[0] if parsed is not None else ""


def allowed_hosts_for(bind: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` names the server answers: the loopback names when it binds a loopback
    address, the bound address otherwise, and ``extra`` (``--allowed-host``).

    Raises:
        ConfigError: it binds every interface and ``extra`` names no host.
    """
    names = {_host_name(name) for name in extra if name.strip()} - {""}
    if is_loopback(bind):
        names |= {"127.0.0.1", "localhost", "::1"}
    elif bind in ("0.0.0.0", "::", ""):
        if not names:
            raise ConfigError(
                f"the review page would listen on every interface ({bind or '0.0.0.0'}): name "
                "the host names annotators open it under with --allowed-host (requests for "
                "any other name are refused, against DNS rebinding)",
                field="allowed_host",
            )
    else:
        names.add(_host_name(bind))
    return frozenset(names)


class _HostAllowlist:
    """Answers 403 to a request whose ``Host`` is not an allowed name (``/healthz`` exempt)."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") != "/healthz":
            host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
            if _host_name(host) not in self.allowed:
                response = JSONResponse(
                    {"error": f"this review server does not answer for host {host!r}"},
                    status_code=403,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _same_site(request: Request, allowed: frozenset[str]) -> None:
    """Refuse an API call another site could have made (no marker header, foreign Origin)."""
    if request.headers.get(CSRF_HEADER) != "1":
        raise PermissionDeniedError(f"send the {CSRF_HEADER}: 1 header (the review page does)")
    origin = request.headers.get("origin")
    host = request.headers.get("host", "")
    if origin is not None and not same_origin(origin, host, request.url.scheme):
        raise PermissionDeniedError(f"requests from {origin} are not accepted")


class _UnsupportedMediaError(InvalidArgumentError):
    """A body that is not JSON (415)."""


def _json_body(content_type: str, body: bytes) -> Any:
    if content_type.split(";", maxsplit=1)[0].strip() != "application/json":
        raise _UnsupportedMediaError("send the body as application/json")
    try:
        return json.loads(body)
    except ValueError:
        raise InvalidArgumentError("the body is not JSON") from None


def _failure(exc: TribunalError) -> JSONResponse:
    if isinstance(exc, _UnsupportedMediaError):
        return JSONResponse({"error": exc.message}, status_code=415)
    return _error(exc)


Handler = Callable[[Request, str], Awaitable[Response]]
EntryQuestions = Callable[[str, Sequence[str]], Mapping[str, str]]
"""(collection, entry ids) -> the question of each entry found (for the link list)."""
_LINKABLE = ("FALLBACK", "ACCEPT", "ESCALATE")
_MAX_LINKABLE = 100


class _ReviewApi:
    """The API's endpoints: who is signed in, the next item, votes, progress."""

    def __init__(
        self,
        queue: ReviewQueue,
        annotators: AnnotatorRegistry,
        allowed: frozenset[str],
        *,
        links: PhrasingLinks | None = None,
        questions: EntryQuestions | None = None,
        attempts: KeyAttempts | None = None,
        search: EntrySearch | None = None,
    ) -> None:
        self.queue = queue
        self.annotators = annotators
        self.allowed = allowed
        self.links = links
        self.questions = questions
        self.search = search
        self.attempts = attempts or KeyAttempts()

    async def _annotator(self, request: Request, key: str) -> str | None:
        """The key's annotator; a wrong key counts against the client, and a client (or
        everyone) past the limit is refused before the key is looked at."""
        client = request.client.host if request.client is not None else ""
        wait = self.attempts.blocked_for(client)
        if wait > 0:
            raise ResourceExhaustedError(
                f"too many wrong annotator keys; try again in {wait:.0f} s"
            )
        name = await run_in_threadpool(self.annotators.annotator, key)
        if name is None:
            self.attempts.failed(client)
        return name

    async def signed_in(self, request: Request) -> str:
        """The annotator of a same-site request with a valid key (cookie, or bearer)."""
        _same_site(request, self.allowed)
        key = request.cookies.get(SESSION_COOKIE, "")
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if not key and scheme.lower() == "bearer":
            key = token.strip()
        name = await self._annotator(request, key) if key else None
        if name is None:
            raise UnauthenticatedError(_SIGN_IN)
        return name

    def guarded(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request, await self.signed_in(request))
            except TribunalError as exc:
                return _failure(exc)

        return endpoint

    async def session(self, request: Request) -> Response:
        try:
            _same_site(request, self.allowed)
            if request.method == "DELETE":
                response = JSONResponse({"signed_out": True})
                response.delete_cookie(SESSION_COOKIE, path="/", samesite="strict")
                return response
            if request.method == "GET":
                # Not signed in is an answer here, not an error: the page asks on load.
                try:
                    return JSONResponse({"annotator": await self.signed_in(request)})
                except UnauthenticatedError:
                    return JSONResponse({"annotator": None})
            body = _json_body(request.headers.get("content-type", ""), await request.body())
            key = body.get("key") if isinstance(body, dict) else None
            if not isinstance(key, str) or not key.strip():
                raise InvalidArgumentError("key must be the annotator key", field="key")
            name = await self._annotator(request, key.strip())
            if name is None:
                raise UnauthenticatedError(
                    f"that key is not valid (unknown or revoked): {_SIGN_IN}"
                )
        except TribunalError as exc:
            return _failure(exc)
        response = JSONResponse({"annotator": name})
        response.set_cookie(
            SESSION_COOKIE,
            key.strip(),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    async def next_item(self, request: Request, annotator: str) -> Response:
        skip = [t for t in request.query_params.get("skip", "").split(",") if t]
        item = await run_in_threadpool(self.queue.next_item, annotator, exclude=skip)
        labelled = await run_in_threadpool(self.queue.labelled, annotator)
        view = item_view(item) if item is not None else None
        if item is not None and view is not None:
            pick = await run_in_threadpool(pick_view, self.queue.db, item, self.questions)
            if pick is not None:
                view["pick"] = pick
        return JSONResponse(
            {"item": view, "labelled": labelled}, headers={"Cache-Control": "no-store"}
        )

    async def vote(self, request: Request, annotator: str) -> Response:
        # JSON only: a cross-site HTML form cannot send application/json.
        body = _json_body(request.headers.get("content-type", ""), await request.body())
        item, label, seconds = _vote_fields(body)
        entry_id = body.get("entry_id")
        if entry_id is not None and not isinstance(entry_id, str):
            raise InvalidArgumentError("entry_id must be a string", field="entry_id")
        result = await run_in_threadpool(
            lambda: pick_vote(
                self.queue,
                annotator,
                item,
                label,
                seconds=seconds,
                entry_id=entry_id,
                questions=self.questions,
                links=self.links,
            )
        )
        if not result.stored:
            # The store holds one vote per (item, annotator): this one is refused.
            raise FailedPreconditionError(
                f"you already voted {result.label!r} on this item; one vote per item"
            )
        return JSONResponse(
            {"stored": result.stored, "label": result.label, "labelled": result.labelled}
        )

    async def stats(self, _request: Request, _annotator: str) -> Response:
        summary = await run_in_threadpool(self.queue.stats)
        # Attention accuracy stays with the operator (`tribunal review stats`).
        summary["annotators"] = [
            {"annotator": entry["annotator"], "votes": entry["votes"]}
            for entry in summary["annotators"]
        ]
        summary.pop("votes", None)
        summary.pop("attention_votes", None)
        return JSONResponse(summary)

    async def entries(self, request: Request, _annotator: str) -> Response:
        """Stored entries of a collection matching an id or text (to pick a fallback's)."""
        if self.search is None:
            raise FailedPreconditionError("searching the KB is off on this server")
        collection, text, limit = search_query(request.query_params)
        search = self.search
        found = await run_in_threadpool(lambda: search(collection, text, limit))
        return JSONResponse({"entries": found}, headers={"Cache-Control": "no-store"})

    def _links(self) -> PhrasingLinks:
        if self.links is None:
            raise FailedPreconditionError("linking queries to KB entries is off on this server")
        return self.links

    async def linkable(self, request: Request, _annotator: str) -> Response:
        """Recent Answer decisions to link, newest first, with their candidates."""
        links = self._links()
        wanted = request.query_params.get("decision", "FALLBACK").upper()
        if wanted not in (*_LINKABLE, "ANY"):
            raise InvalidArgumentError(
                f"decision {wanted!r}: use {', '.join(_LINKABLE)} or ANY", field="decision"
            )
        limit = _bounded_int(request.query_params.get("limit", "20"), "limit", _MAX_LINKABLE)
        decisions = await run_in_threadpool(
            self.queue.db.decisions,
            kind="answer",
            decision=None if wanted == "ANY" else wanted,
            limit=limit,
        )
        decisions = [d for d in decisions if d.collection]
        linked = await run_in_threadpool(links.linked_decisions, [d.id for d in decisions])
        rows = []
        for record in decisions:
            ids = list(record.candidate_ids)
            if self.questions is not None and ids:
                found = await run_in_threadpool(self.questions, record.collection, ids)
            else:
                found = {}
            rows.append(
                {
                    "audit_id": record.id,
                    "query": record.query,
                    "collection": record.collection,
                    "decision": record.decision,
                    "reason": record.reason,
                    "created_at": record.created_at.isoformat() if record.created_at else None,
                    "candidates": [{"id": i, "question": found.get(i, "")} for i in ids],
                    "linked": linked.get(record.id, []),
                }
            )
        return JSONResponse({"decisions": rows}, headers={"Cache-Control": "no-store"})

    async def link(self, request: Request, annotator: str) -> Response:
        """Link a decision's query to the entry that answers it (pending an admin)."""
        links = self._links()
        body = _json_body(request.headers.get("content-type", ""), await request.body())
        if not isinstance(body, dict):
            raise InvalidArgumentError("the link must be a JSON object")
        values = [body.get(name) for name in ("audit_id", "entry_id")]
        for name, value in zip(("audit_id", "entry_id"), values, strict=True):
            if not isinstance(value, str):
                raise InvalidArgumentError(f"{name} must be a string", field=name)
        link, created = await run_in_threadpool(
            lambda: links.propose(annotator, audit_id=str(values[0]), entry_id=str(values[1]))
        )
        return JSONResponse(
            {"link": link.to_json(), "created": created}, status_code=201 if created else 200
        )


def _bounded_int(value: str, name: str, limit: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InvalidArgumentError(f"{name} must be a whole number", field=name) from None
    if not 1 <= number <= limit:
        raise InvalidArgumentError(f"{name} must be between 1 and {limit}", field=name)
    return number


def _page(_request: Request) -> Response:
    return HTMLResponse(PAGE, headers=HEADERS)


def _health(_request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def create_app(
    queue: ReviewQueue,
    annotators: AnnotatorRegistry,
    allowed_hosts: frozenset[str] = frozenset({"127.0.0.1", "localhost", "::1"}),
    *,
    links: PhrasingLinks | None = None,
    questions: EntryQuestions | None = None,
    attempts: KeyAttempts | None = None,
    search: EntrySearch | None = None,
) -> ASGIApp:
    """The review app on ``queue``, for the annotators of ``annotators``, answering only
    for ``allowed_hosts``; with ``links``, queries can be linked to KB entries
    (``questions`` shows the candidates' questions); ``attempts`` limits wrong keys
    (default: 10 per client and 100 overall per minute); ``search`` lets an audited
    fallback's reviewer search the KB for the entry that answers it. Database calls run in
    Starlette's thread pool."""
    api = _ReviewApi(
        queue,
        annotators,
        allowed_hosts,
        links=links,
        questions=questions,
        attempts=attempts,
        search=search,
    )
    app = Starlette(
        routes=[
            Route("/", _page),
            Route("/api/session", api.session, methods=["GET", "POST", "DELETE"]),
            Route("/api/next", api.guarded(api.next_item)),
            Route("/api/vote", api.guarded(api.vote), methods=["POST"]),
            Route("/api/stats", api.guarded(api.stats)),
            Route("/api/linkable", api.guarded(api.linkable)),
            Route("/api/link", api.guarded(api.link), methods=["POST"]),
            Route("/api/entries", api.guarded(api.entries)),
            Route("/healthz", _health),
        ]
    )
    return _HostAllowlist(app, allowed_hosts)


def _vote_fields(body: Any) -> tuple[str, str, float | None]:
    if not isinstance(body, dict):
        raise InvalidArgumentError("the vote must be a JSON object")
    values = [body.get(name) for name in ("item", "label")]
    for name, value in zip(("item", "label"), values, strict=True):
        if not isinstance(value, str):
            raise InvalidArgumentError(f"{name} must be a string", field=name)
    seconds = body.get("seconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float)):
        raise InvalidArgumentError("seconds must be a number", field="seconds")
    return str(values[0]), str(values[1]), float(seconds) if seconds is not None else None


def review_server(
    queue: ReviewQueue,
    *,
    annotators: AnnotatorRegistry | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    allowed_hosts: Iterable[str] = (),
    links: PhrasingLinks | None = None,
    questions: EntryQuestions | None = None,
    search: EntrySearch | None = None,
) -> tuple[uvicorn.Server, socket.socket]:
    """A uvicorn server for the app and its bound socket (port 0 picks a free port).

    ``annotators`` defaults to the queue's store; ``allowed_hosts`` adds ``Host`` names
    to those :func:`allowed_hosts_for` derives from ``host``. The caller runs
    ``server.run(sockets=[sock])`` (blocking) and reads the port from
    ``sock.getsockname()``; binding first is what lets tests use a free port race-free.
    """
    allowed = allowed_hosts_for(host, allowed_hosts)
    registry = annotators if annotators is not None else AnnotatorRegistry(queue.db)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidArgumentError(
            f"cannot listen on {host}:{port}: {exc.strerror}; pick another --port", field="port"
        ) from None
    config = uvicorn.Config(
        create_app(queue, registry, allowed, links=links, questions=questions, search=search),
        log_level="warning",
        access_log=False,
    )
    return uvicorn.Server(config), sock

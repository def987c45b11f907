"""A synchronous httpx client of the Palette API subset (docs/palette.md).

Why it looks the way it does:
- every call has a timeout and goes through one ``_call`` that retries with a :class:`RetryPolicy`
  exactly the errors :func:`classify` calls transient (429, 5xx and connection errors; ``Retry-After``
  honoured), bounded in attempts and total time; 401/403 and other 4xx are never retried;
- every attempt first takes a token of its path class (:mod:`reconciler.palette.pacing`), so the client
  keeps under Palette's rate limits by itself instead of provoking 429s;
- a create (``POST /v1/spectroclusters/edge-native``) is not idempotent, so it is retried only when the
  server certainly did not act on it: a 429, or a connection that failed before the request was sent.
  After a timeout or a dropped connection the caller re-observes by labels instead of re-sending;
- errors are typed (:mod:`reconciler.palette.errors`) and never contain the API key;
- ``on_request(method, path_template, status)`` reports every attempt (status 0 when no response came)
  so the caller can keep Prometheus counters without this package importing them;
- ``fence()`` (the writer lease's, ``reconciler.fencing``) is called right before every attempt of a
  request that changes something (create, machine pools, delete, profile attach and detach), retries
  included: when it raises, the request is not sent and the exception ends the call unchanged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from reconciler.palette import wire
from reconciler.palette.endpoints import (
    CLOUD_CONFIG,
    CLUSTER,
    CLUSTER_CREATE,
    CLUSTER_PROFILES,
    CLUSTERS_SEARCH,
    EDGE_HOSTS_SEARCH,
    MACHINE_POOL,
    MACHINE_POOLS,
    POOL_MACHINE,
    POOL_MACHINES,
    PROFILE,
    cluster_search_body,
    edge_host_search_body,
    http_date,
    parse_retry_after,
    quote_path,
    string_filter,
)
from reconciler.palette.errors import (
    ErrorClass,
    NotFoundError,
    PaletteError,
    RateLimitedError,
    ServerError,
    TransportError,
    classify,
    error_for_status,
)
from reconciler.palette.pacing import Pacer, RateLimits, path_class
from reconciler.retry import RetryPolicy

PAGE_LIMIT = 50  # Palette's maximum page size for search endpoints
MAX_PAGES = 10_000  # a safety stop against a server that never ends its continue chain

RequestHook = Callable[[str, str, int], None]
WaitHook = Callable[[str, float], None]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Page:
    """One page of a search: its items, ``listmeta.count`` and ``continue``, and the server's ``Date``
    (epoch seconds, None when absent): the server's own clock, which incremental reads key on."""

    items: list[dict[str, Any]]
    count: int | None
    continue_token: str
    server_time: float | None


class _Retryable(Exception):
    """Internal: an attempt failed in a way that may be retried; carries the error to raise at the end."""

    def __init__(self, error: PaletteError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


class PaletteClient:
    """Palette API client. Use as a context manager (or call :meth:`close`) to release connections."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        project_uid: str | None = None,
        *,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        on_request: RequestHook | None = None,
        rate_limits: RateLimits | None = None,
        on_wait: WaitHook | None = None,
        fence: Callable[[], None] | None = None,
        pacer: Pacer | None = None,
    ) -> None:
        """``rate_limits`` defaults to Palette's (``RateLimits.off()`` turns pacing off); ``pacer``
        replaces the pacer built from them (tests pass one on a fake clock and sleep);
        ``on_wait(path_class, seconds)`` reports each wait for a token; ``fence`` is asked before every
        attempt of a mutating request (it raises to keep the request from being sent)."""
        if not api_key:
            raise ValueError("a Palette API key is required")
        self.base_url = base_url.rstrip("/")
        self.project_uid = project_uid
        self._api_key = api_key
        self._retry = retry or RetryPolicy()
        self._timeout = timeout
        self._on_request = on_request
        self._on_wait = on_wait
        if pacer is None:
            pacer = Pacer(rate_limits if rate_limits is not None else RateLimits.palette())
        self._pacer = pacer
        self.fence = fence
        self._sent: Counter[str] = Counter()
        headers = {"ApiKey": api_key, "Accept": "application/json"}
        if project_uid:
            headers["ProjectUid"] = project_uid
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=httpx.Timeout(timeout), transport=transport
        )

    def __repr__(self) -> str:
        return f"PaletteClient(base_url={self.base_url!r}, project_uid={self.project_uid!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def requests_sent(self, path_class: str | None = None) -> int:
        """HTTP requests sent so far (retries included), of one path class (``pacing.DASHBOARD``, ...)
        or all of them."""
        return sum(self._sent.values()) if path_class is None else self._sent[path_class]

    def seconds_waited(self) -> float:
        """Total time spent waiting for rate-limit tokens."""
        return sum(self._pacer.waited.values())

    # --- edge hosts --------------------------------------------------------------------------------

    def search_edge_hosts(self, tags: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """Every edge host carrying all ``tags`` (as the API returns them), reading all pages.

        Offset paging can repeat an item when the inventory changes between pages; the first copy wins.
        """
        items: dict[str, dict[str, Any]] = {}
        for item in self._search(EDGE_HOSTS_SEARCH, edge_host_search_body(tags)):
            host = self._check(wire.EdgeHost, item, "POST", EDGE_HOSTS_SEARCH)
            items.setdefault(host.metadata.uid or f"\0{len(items)}", item)
        return list(items.values())

    def edge_host_pages(self, body: Mapping[str, Any]) -> Iterator[Page]:
        """Every page of one edge-host search, lazily, with its ``listmeta`` and the server's time
        (:class:`reconciler.palette.hosts.HostLister` builds incremental reads on it)."""
        return self._pages(EDGE_HOSTS_SEARCH, dict(body))

    def edge_host_page(self, body: Mapping[str, Any], continue_token: str = "") -> Page:
        """One page of an edge-host search, from ``continue_token`` ("" for the first page)."""
        return self._page(EDGE_HOSTS_SEARCH, dict(body), continue_token)

    # --- clusters ----------------------------------------------------------------------------------

    def search_clusters(self, labels: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """Cluster summaries (``v1SpectroClusterSummary``) carrying all ``labels``, excluding deleted ones."""
        wanted = dict(labels or {})
        found: list[dict[str, Any]] = []
        for item in self._search(CLUSTERS_SEARCH, cluster_search_body()):
            summary = self._check(wire.SpectroClusterSummary, item, "POST", CLUSTERS_SEARCH)
            state = summary.status.state if summary.status else None
            if state == "Deleted":
                continue
            if all(summary.metadata.labels.get(k) == v for k, v in wanted.items()):
                found.append(item)
        return found

    def find_cluster_by_name(self, name: str) -> dict[str, Any] | None:
        """The cluster summary named ``name`` (not deleted), or None: the SDK's ``GetClusterByName``
        search (a ``clusterName`` filter). Used to confirm that a create whose answer was lost did
        not happen, once Palette's search index has had time to list it."""
        body = cluster_search_body()
        body["filter"]["filterGroups"].append(
            {"conjunction": "and", "filters": [string_filter("clusterName", [name])]}
        )
        for item in self._search(CLUSTERS_SEARCH, body):
            summary = self._check(wire.SpectroClusterSummary, item, "POST", CLUSTERS_SEARCH)
            if summary.metadata.name == name and (
                summary.status is None or summary.status.state != "Deleted"
            ):
                return item
        return None

    def get_cluster(self, uid: str) -> dict[str, Any] | None:
        """The cluster (``v1SpectroCluster``), or None when it is gone (404 or state ``Deleted``)."""
        try:
            body = self._json(self._call("GET", CLUSTER, {"uid": uid}))
        except NotFoundError:
            return None
        cluster = self._check(wire.SpectroCluster, body, "GET", CLUSTER)
        if cluster.status is not None and cluster.status.state == "Deleted":
            return None
        return body

    def create_edge_native_cluster(self, entity: Mapping[str, Any]) -> str:
        """Create an edge-native cluster; returns its uid. Not retried after an ambiguous failure."""
        response = self._call("POST", CLUSTER_CREATE, {}, json=dict(entity), idempotent=False, mutating=True)
        created = self._check(wire.Uid, self._json(response), "POST", CLUSTER_CREATE)
        return created.uid

    def delete_cluster(self, uid: str) -> None:
        """Start deleting a cluster; a cluster that is already gone is fine."""
        try:
            self._call("DELETE", CLUSTER, {"uid": uid}, mutating=True)
        except NotFoundError:
            return

    def get_cloud_config(self, config_uid: str) -> dict[str, Any]:
        """The edge-native cloud config (``v1EdgeNativeCloudConfig``): machine pools and their hosts."""
        body = self._json(self._call("GET", CLOUD_CONFIG, {"configUid": config_uid}))
        self._check(wire.EdgeNativeCloudConfig, body, "GET", CLOUD_CONFIG)
        return body

    def update_machine_pool(self, config_uid: str, pool_name: str, entity: Mapping[str, Any]) -> None:
        """Replace one machine pool (its full host list); Palette answers 204."""
        params = {"configUid": config_uid, "machinePoolName": pool_name}
        self._call("PUT", MACHINE_POOL, params, json=dict(entity), mutating=True)

    def create_machine_pool(self, config_uid: str, entity: Mapping[str, Any]) -> None:
        """Add a machine pool to a cluster (for a first worker pool). Not retried after ambiguous failures."""
        params = {"configUid": config_uid}
        self._call("POST", MACHINE_POOLS, params, json=dict(entity), idempotent=False, mutating=True)

    def list_pool_machines(self, config_uid: str, pool_name: str) -> list[dict[str, Any]]:
        """The machines of one edge-native machine pool (``v1EdgeNativeMachines.items``)."""
        params = {"configUid": config_uid, "machinePoolName": pool_name}
        body = self._json(self._call("GET", POOL_MACHINES, params))
        items = body.get("items") if isinstance(body, dict) else None
        return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []

    def delete_pool_machine(self, config_uid: str, pool_name: str, machine_uid: str) -> None:
        """Delete one machine of a pool (204); one already gone is fine."""
        params = {"configUid": config_uid, "machinePoolName": pool_name, "machineUid": machine_uid}
        try:
            self._call("DELETE", POOL_MACHINE, params, mutating=True)
        except NotFoundError:
            return

    # --- cluster profiles of a cluster (docs/palette.md) --------------------------------

    def get_cluster_profiles(self, uid: str) -> list[dict[str, Any]]:
        """The profiles attached to a cluster (``v1SpectroClusterProfileList.profiles``)."""
        body = self._json(self._call("GET", CLUSTER_PROFILES, {"uid": uid}))
        listing = self._check(wire.ClusterProfileList, body, "GET", CLUSTER_PROFILES)
        return list(listing.profiles)

    def attach_profiles(self, uid: str, profiles: Sequence[Mapping[str, Any]]) -> None:
        """Attach cluster profiles (``PATCH``, body ``v1SpectroClusterProfiles``); attached ones that are
        not named stay attached. ``profiles`` are ``v1SpectroClusterProfileEntity`` items."""
        if not profiles:
            raise ValueError("attach_profiles needs at least one profile")
        body = {"profiles": [dict(p) for p in profiles]}
        self._call("PATCH", CLUSTER_PROFILES, {"uid": uid}, json=body, mutating=True)

    def detach_profiles(self, uid: str, profile_uids: Iterable[str]) -> None:
        """Detach exactly the named profiles (``DELETE`` with body ``{profileUids}``)."""
        uids = sorted(set(profile_uids))
        if not uids:
            raise ValueError("detach_profiles needs at least one profile uid")
        self._call("DELETE", CLUSTER_PROFILES, {"uid": uid}, json={"profileUids": uids}, mutating=True)

    def get_cluster_profile(self, uid: str) -> dict[str, Any] | None:
        """One profile of the catalogue (``v1ClusterProfile``: its type in ``spec.published.type``), or
        None when Palette does not have it (404). Any other failure is raised, never read as absent."""
        try:
            body = self._json(self._call("GET", PROFILE, {"uid": uid}))
        except NotFoundError:
            return None
        self._check(wire.ClusterProfile, body, "GET", PROFILE)
        return body

    # --- plumbing ----------------------------------------------------------------------------------

    def _search(self, template: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """Read every page of a search endpoint (``limit`` 50, ``continue`` until empty)."""
        return [item for page in self._pages(template, body) for item in page.items]

    def _pages(self, template: str, body: dict[str, Any]) -> Iterator[Page]:
        token = ""
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            page = self._page(template, body, token)
            yield page
            token = page.continue_token
            if not token:
                return
            if token in seen:
                raise ServerError(
                    "paging did not advance: a continue token repeated", method="POST", path=template
                )
            seen.add(token)
        raise ServerError(f"more than {MAX_PAGES} pages", method="POST", path=template)

    def _page(self, template: str, body: dict[str, Any], token: str) -> Page:
        params: dict[str, str | int] = {"limit": PAGE_LIMIT}
        if token:
            params["continue"] = token
        response = self._call("POST", template, {}, json=body, query=params)
        summary = self._check(wire.SearchPage, self._json(response), "POST", template)
        meta = summary.listmeta
        return Page(
            items=list(summary.items or []),
            count=meta.count if meta is not None else None,
            continue_token=(meta.continue_ if meta is not None else "") or "",
            server_time=http_date(response.headers.get("Date")),
        )

    def _call(
        self,
        method: str,
        template: str,
        path_params: Mapping[str, str],
        *,
        json: Any = None,
        query: Mapping[str, str | int] | None = None,
        idempotent: bool = True,
        mutating: bool = False,
    ) -> httpx.Response:
        """One logical call with retries. Raises a typed :class:`PaletteError` when it finally fails.
        A ``mutating`` call asks the fence before every attempt (whatever it raises ends the call)."""
        path = template.format(**{k: quote_path(v) for k, v in path_params.items()})
        shown = self._scrub(path)  # the path that errors carry: even a key passed as a uid stays hidden
        backoff = self._retry.backoff()
        while True:
            # No attempt may outlive the total budget, so the call as a whole ends within it.
            budget = min(self._timeout, max(backoff.remaining(), 0.001))
            try:
                return self._attempt(method, template, path, shown, json, query, idempotent, budget, mutating)
            except _Retryable as failure:
                delay = backoff.next_delay(failure.retry_after)
                if delay is None:
                    raise failure.error from None
                backoff.wait(delay)

    def _attempt(
        self,
        method: str,
        template: str,
        path: str,
        shown: str,
        body: Any,
        query: Mapping[str, str | int] | None,
        idempotent: bool,
        timeout: float,
        mutating: bool = False,
    ) -> httpx.Response:
        klass = path_class(path)
        waited = self._pacer.acquire(path)
        if waited and self._on_wait is not None:
            self._on_wait(klass, waited)
        if mutating and self.fence is not None:
            self.fence()  # at the moment of sending (after any wait for a token), on every attempt
        self._sent[klass] += 1
        try:
            response = self._http.request(method, path, json=body, params=query, timeout=timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            # Nothing reached the server: safe to retry even a create.
            self._report(method, template, 0)
            raise _Retryable(self._transport_error(exc, method, shown)) from None
        except httpx.TransportError as exc:
            self._report(method, template, 0)
            error = self._transport_error(exc, method, shown)
            if idempotent:
                raise _Retryable(error) from None
            raise error from None
        self._report(method, template, response.status_code)
        status = response.status_code
        if status < 400:
            return response
        failure = self._http_error(response, method, shown)
        if classify(failure) is not ErrorClass.TRANSIENT:
            raise failure
        if isinstance(failure, RateLimitedError):  # refused before acting: safe even for a create
            raise _Retryable(failure, failure.retry_after)
        if idempotent:
            raise _Retryable(failure)
        raise failure

    def _report(self, method: str, template: str, status: int) -> None:
        if self._on_request is not None:
            self._on_request(method, template, status)

    def _scrub(self, text: str) -> str:
        """Remove the API key from any text a server or library might echo back."""
        return text.replace(self._api_key, "***") if self._api_key else text

    def _transport_error(self, exc: httpx.TransportError, method: str, path: str) -> TransportError:
        kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection error"
        detail = self._scrub(str(exc)) or type(exc).__name__
        return TransportError(f"{kind}: {detail}", method=method, path=path)

    def _http_error(self, response: httpx.Response, method: str, path: str) -> PaletteError:
        status = response.status_code
        code: str | None = None
        message = response.reason_phrase or f"HTTP {status}"
        try:
            parsed = wire.V1Error.model_validate(response.json())
        except (ValueError, ValidationError):
            parsed = None
        if parsed is not None:
            code = None if parsed.code is None else str(parsed.code)
            message = parsed.message or message
        message = self._scrub(message)
        code = self._scrub(code) if code else code
        return error_for_status(
            status,
            message,
            code=code,
            method=method,
            path=path,
            retry_after=parse_retry_after(response.headers.get("Retry-After")),
        )

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        """The body as a JSON object; anything else is a server error."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ServerError(
                "response is not a JSON object",
                status=response.status_code,
                method=response.request.method,
                path=self._scrub(response.request.url.path),
            )
        return body

    def _check(self, model: type[M], body: Any, method: str, template: str) -> M:
        """Validate a response body against its tolerant wire model; a mismatch is a server error."""
        try:
            return model.model_validate(body)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()[:3]
            )
            raise ServerError(
                f"unexpected {model.__name__} shape: {problems}", method=method, path=template
            ) from None

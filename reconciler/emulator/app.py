"""The emulator's HTTP surface: Palette's paths over :class:`EmulatorState`, plus ``/__emulator/`` admin.

Request flow for Palette paths (outermost first): count the request in the stats, apply fault injection
(latency, dropped connection, 429, 5xx), enforce Palette's rate limits (per API key and path class,
429 ``TooManyRequests`` with ``Retry-After``), check the API key, then route. Every answer carries a
``Date`` from the emulator's clock (clients key incremental reads on it). Admin endpoints skip all of
that: they need no key and are never faulted, limited or counted, so tests can steer and inspect freely.
"""

from __future__ import annotations

import asyncio
import email.utils
import hmac
import json
import math
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route
from starlette.types import Message, Receive, Scope, Send

from reconciler.emulator.asgi_faults import corrupting, drop, read_body, replay, swallowed
from reconciler.emulator.errors import ApiError
from reconciler.emulator.faults import Decision, FaultRule, Faults, fault_error
from reconciler.emulator.metering import RateLimiter, Stats
from reconciler.emulator.state import EmulatorState
from reconciler.emulator.utilization import METRICS_PATH, Utilization
from reconciler.palette.pacing import RateLimits

ADMIN_PREFIX = "/__emulator/"
Handler = Callable[[Request], Awaitable[Response]]


def _error_response(error: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


def _handles_errors(handler: Handler) -> Handler:
    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as error:
            return _error_response(error)

    wrapped.__name__ = handler.__name__
    return wrapped


async def _json_body(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiError(400, "InvalidRequest", "the body is not valid JSON") from None


def _project(request: Request) -> str | None:
    return request.headers.get("ProjectUid") or None


def _presented_key(scope: Scope) -> bytes:
    for name, value in scope.get("headers", []):
        if name.lower() in (b"apikey", b"authorization"):
            return bytes(value)
    return b""


class EmulatorApp:
    """The ASGI application. ``state``, ``faults`` and ``stats`` are public for tests and the demo."""

    def __init__(
        self,
        state: EmulatorState,
        api_key: str,
        faults: Faults,
        stats: Stats,
        rate_limits: RateLimits | None = None,
    ) -> None:
        if not api_key:
            raise ValueError("the emulator needs an API key to check requests against")
        self.state = state
        self.faults = faults
        self.stats = stats
        self._late: list[tuple[float, Scope, bytes]] = []  # requests to carry out later (due, ...)
        self.utilization = Utilization(state)
        # The emulator's own clock: a test with a fake clock decides when tokens come back.
        self.limiter = RateLimiter(
            rate_limits if rate_limits is not None else RateLimits.palette(), state.clock
        )
        self._api_key = api_key.encode()
        self._palette = Starlette(routes=self._palette_routes())
        self._admin = Starlette(routes=self._admin_routes())

    def __repr__(self) -> str:
        return "EmulatorApp()"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._palette(scope, receive, send)
            return
        path: str = scope["path"]
        if path.startswith(ADMIN_PREFIX) or path == METRICS_PATH:  # no key, no faults, not counted
            await self._admin(scope, receive, send)
            return
        method: str = scope["method"]
        template = self._template(scope)
        dated = self._dated(send)
        await self._deliver_late()
        decision = self.faults.decide(method, path)
        if decision.latency:
            await asyncio.sleep(decision.latency)
        if decision.drop:
            self.stats.record(method, template, 0)
            await drop(send)
            return
        if decision.status:
            error = fault_error(decision, method, path)
            headers = (
                {"Retry-After": f"{decision.retry_after:g}"} if decision.retry_after is not None else None
            )
            self.stats.record(method, template, decision.status)
            await _error_response(error, headers)(scope, receive, dated)
            return
        wait = self.limiter.check(_presented_key(scope), path)
        if wait is not None:
            self.stats.record(method, template, 429)
            error = ApiError(429, "TooManyRequests", f"Too Many Requests, [{method}] {path}")
            # Retry-After is whole seconds (RFC 9110); Palette does not document whether it sends one.
            retry = {"Retry-After": str(max(1, math.ceil(wait)))}
            await _error_response(error, retry)(scope, receive, dated)
            return
        if not self._authorized(scope):
            self.stats.record(method, template, 401)
            error = ApiError(401, "Unauthorized", "a valid API key is required (header ApiKey)")
            await _error_response(error)(scope, receive, dated)
            return

        async def counting_send(message: Message) -> None:
            # Count before the answer leaves, so a client that has its answer always sees it counted.
            if message["type"] == "http.response.start":
                self.stats.record(method, template, int(message["status"]))
            await dated(message)

        if decision.lost:  # carried out (now or later), but the client is told it failed
            error = fault_error(Decision(status=decision.lost), method, path)
            if decision.late_by is not None:
                body = await read_body(receive)
                self._late.append((self.state.clock() + decision.late_by, scope, body))
            else:
                await self._palette(scope, receive, swallowed)
            self.stats.record(method, template, decision.lost)
            await _error_response(error)(scope, receive, dated)
            return
        send_on = counting_send if not decision.corrupt else corrupting(counting_send, decision)
        await self._palette(scope, receive, send_on)

    async def _deliver_late(self) -> None:
        """Carry out the late requests that are due (their answers went nowhere long ago)."""
        now = self.state.clock()
        due = [item for item in self._late if item[0] <= now]
        self._late = [item for item in self._late if item[0] > now]
        for _at, scope, body in due:
            await self._palette(scope, replay(body), swallowed)

    def _dated(self, send: Send) -> Send:
        """``send`` adding a ``Date`` header from the emulator's clock (so a fake clock shows in it)."""

        async def dated_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                stamp = email.utils.formatdate(self.state.clock(), usegmt=True).encode()
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"date"]
                message = {**message, "headers": [*headers, (b"date", stamp)]}
            await send(message)

        return dated_send

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", []):
            if name.lower() in (b"apikey", b"authorization") and hmac.compare_digest(value, self._api_key):
                return True
        return False

    def _template(self, scope: Scope) -> str:
        """The route's path template (``/v1/spectroclusters/{uid}``), for stats and metrics."""
        partial = None
        for route in self._palette.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL and isinstance(route, Route):
                return route.path
            if match is Match.PARTIAL and partial is None and isinstance(route, Route):
                partial = route.path
        return partial or "<unmatched>"

    # --- Palette paths -----------------------------------------------------------------------------

    def _palette_routes(self) -> list[Route]:
        state = self.state

        def searcher(search: Callable[..., dict[str, Any]]) -> Handler:
            """A paged search endpoint: filter body, limit/continue/offset query, project scope."""

            @_handles_errors
            async def handle(request: Request) -> Response:
                body = await _json_body(request)
                q = request.query_params
                page = search(_project(request), body, q.get("limit"), q.get("continue"), q.get("offset"))
                return JSONResponse(page)

            return handle

        search_hosts = searcher(state.search_hosts)
        search_clusters = searcher(state.search_clusters)

        @_handles_errors
        async def create_cluster(request: Request) -> Response:
            uid = state.create_cluster(_project(request), await _json_body(request))
            return JSONResponse({"uid": uid}, status_code=201, headers={"AuditUid": f"audit-{uid}"})

        @_handles_errors
        async def get_cluster(request: Request) -> Response:
            return JSONResponse(state.get_cluster(request.path_params["uid"], _project(request)))

        @_handles_errors
        async def delete_cluster(request: Request) -> Response:
            state.delete_cluster(request.path_params["uid"], _project(request))
            return Response(status_code=204)

        @_handles_errors
        async def get_cloud_config(request: Request) -> Response:
            return JSONResponse(state.get_cloud_config(request.path_params["configUid"], _project(request)))

        @_handles_errors
        async def create_pool(request: Request) -> Response:
            name = state.create_machine_pool(
                request.path_params["configUid"], _project(request), await _json_body(request)
            )
            return JSONResponse({"uid": name}, status_code=201, headers={"AuditUid": f"audit-{name}"})

        @_handles_errors
        async def update_pool(request: Request) -> Response:
            params = request.path_params
            state.update_machine_pool(
                params["configUid"], params["machinePoolName"], _project(request), await _json_body(request)
            )
            return Response(status_code=204)

        pools = "/v1/cloudconfigs/edge-native/{configUid}/machinePools"
        return [
            *self._profile_and_machine_routes(),
            Route("/v1/dashboard/edgehosts/search", search_hosts, methods=["POST"]),
            Route("/v1/dashboard/spectroclusters/search", search_clusters, methods=["POST"]),
            Route("/v1/spectroclusters/edge-native", create_cluster, methods=["POST"]),
            Route("/v1/spectroclusters/{uid}", get_cluster, methods=["GET"]),
            Route("/v1/spectroclusters/{uid}", delete_cluster, methods=["DELETE"]),
            Route("/v1/cloudconfigs/edge-native/{configUid}", get_cloud_config, methods=["GET"]),
            Route(pools, create_pool, methods=["POST"]),
            Route(pools + "/{machinePoolName}", update_pool, methods=["PUT"]),
        ]

    def _profile_and_machine_routes(self) -> list[Route]:
        """Cluster profiles of a cluster and of the catalogue, machines of an edge-native pool, and the
        cluster overview."""
        state = self.state

        @_handles_errors
        async def get_profiles(request: Request) -> Response:
            return JSONResponse(state.get_cluster_profiles(request.path_params["uid"], _project(request)))

        @_handles_errors
        async def patch_profiles(request: Request) -> Response:
            body = await _json_body(request)
            state.attach_profiles(request.path_params["uid"], _project(request), body)
            return Response(status_code=204)

        @_handles_errors
        async def delete_profiles(request: Request) -> Response:
            body = await _json_body(request)
            state.detach_profiles(request.path_params["uid"], _project(request), body)
            return Response(status_code=204)

        @_handles_errors
        async def list_machines(request: Request) -> Response:
            params = request.path_params
            machines = state.list_machines(params["configUid"], params["machinePoolName"], _project(request))
            return JSONResponse(machines)

        @_handles_errors
        async def get_machine(request: Request) -> Response:
            params = request.path_params
            machine = state.get_machine(
                params["configUid"], params["machinePoolName"], params["machineUid"], _project(request)
            )
            return JSONResponse(machine)

        @_handles_errors
        async def delete_machine(request: Request) -> Response:
            params = request.path_params
            state.delete_machine(
                params["configUid"], params["machinePoolName"], params["machineUid"], _project(request)
            )
            return Response(status_code=204)

        @_handles_errors
        async def overview(request: Request) -> Response:
            return JSONResponse(state.cluster_overview(request.path_params["uid"], _project(request)))

        @_handles_errors
        async def get_cluster_profile(request: Request) -> Response:
            return JSONResponse(state.cluster_profile(request.path_params["uid"]))

        profiles = "/v1/spectroclusters/{uid}/profiles"
        machines = "/v1/cloudconfigs/edge-native/{configUid}/machinePools/{machinePoolName}/machines"
        return [
            Route(profiles, get_profiles, methods=["GET"]),
            Route(profiles, patch_profiles, methods=["PATCH"]),
            Route(profiles, delete_profiles, methods=["DELETE"]),
            Route(machines, list_machines, methods=["GET"]),
            Route(machines + "/{machineUid}", get_machine, methods=["GET"]),
            Route(machines + "/{machineUid}", delete_machine, methods=["DELETE"]),
            Route("/v1/dashboard/spectroclusters/{uid}/overview", overview, methods=["GET"]),
            Route("/v1/clusterprofiles/{uid}", get_cluster_profile, methods=["GET"]),
        ]

    # --- admin -------------------------------------------------------------------------------------

    def _admin_routes(self) -> list[Route]:
        state, faults, stats = self.state, self.faults, self.stats

        async def get_state(_request: Request) -> Response:
            return JSONResponse(state.snapshot_view())

        @_handles_errors
        async def patch_host(request: Request) -> Response:
            return JSONResponse(state.patch_host(request.path_params["uid"], await _json_body(request)))

        @_handles_errors
        async def add_faults(request: Request) -> Response:
            body = await _json_body(request)
            items: Iterable[Any] = []
            if isinstance(body, list):
                items = body
            elif isinstance(body, dict):
                items = body.get("rules", [body])
            try:
                rules = [FaultRule.from_json(item) for item in items]
            except ValueError as exc:
                raise ApiError(400, "InvalidRequest", str(exc)) from None
            if isinstance(body, dict) and isinstance(body.get("seed"), int):
                faults.reseed(body["seed"])
            faults.add(rules)
            return JSONResponse({"rules": faults.rules()})

        async def list_faults(_request: Request) -> Response:
            return JSONResponse({"rules": faults.rules()})

        async def clear_faults(_request: Request) -> Response:
            faults.clear()
            return Response(status_code=204)

        @_handles_errors
        async def put_host(request: Request) -> Response:
            body = await _json_body(request)
            uid = request.path_params["uid"]
            if isinstance(body, dict):
                body.setdefault("metadata", {})["uid"] = uid
            return JSONResponse(state.put_host(body))

        @_handles_errors
        async def delete_host(request: Request) -> Response:
            state.remove_host(request.path_params["uid"])
            return Response(status_code=204)

        async def get_stats(_request: Request) -> Response:
            return JSONResponse(stats.to_json())

        async def reset_stats(_request: Request) -> Response:
            stats.reset()
            return Response(status_code=204)

        return [
            Route("/__emulator/state", get_state, methods=["GET"]),
            Route("/__emulator/hosts/{uid}", patch_host, methods=["PATCH"]),
            Route("/__emulator/hosts/{uid}", put_host, methods=["PUT"]),
            Route("/__emulator/hosts/{uid}", delete_host, methods=["DELETE"]),
            Route("/__emulator/faults", add_faults, methods=["POST"]),
            Route("/__emulator/faults", list_faults, methods=["GET"]),
            Route("/__emulator/faults", clear_faults, methods=["DELETE"]),
            Route("/__emulator/stats", get_stats, methods=["GET"]),
            Route("/__emulator/reset-stats", reset_stats, methods=["POST"]),
            *self.utilization.routes(),
        ]


def create_app(
    state: EmulatorState,
    api_key: str,
    *,
    faults: Iterable[FaultRule] = (),
    seed: int = 0,
    rate_limits: RateLimits | None = None,
) -> EmulatorApp:
    """An ASGI app serving ``state`` to clients that present ``api_key``, under ``rate_limits``
    (Palette's unless told otherwise; ``RateLimits.off()`` for tests that are not about them)."""
    return EmulatorApp(state, api_key, Faults(faults, seed), Stats(), rate_limits)

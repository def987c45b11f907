"""A faithful fake of the Kubernetes API's Lease endpoints (``coordination.k8s.io/v1``), on loopback.

No kube-apiserver can run on this machine, so the `--lease kubernetes` backend is tested against this
fake instead. It keeps to the API server's behaviour where the backend depends on it:

- objects carry ``metadata.resourceVersion`` (a string that changes on every write), ``uid`` and
  ``creationTimestamp``; MicroTime fields come back as RFC 3339 with microseconds;
- ``POST`` of an existing name is 409 ``AlreadyExists``; ``PUT`` whose ``resourceVersion`` is not the
  current one is 409 ``Conflict`` (optimistic concurrency); a ``PUT`` without one is unconditional, as
  for the real server; unknown names are 404 ``NotFound``; errors are ``Status`` objects;
- every request is logged, so tests can check the compare-and-swap really was asked for.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

PREFIX = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
_TIME_FIELDS = ("acquireTime", "renewTime")


def _status(code: int, reason: str, message: str) -> JSONResponse:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return JSONResponse(body, status_code=code)


def _micro_time(value: str | None) -> str | None:
    if value is None:
        return None
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class FakeLeaseAPI:
    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[tuple[str, str, dict[str, Any] | None]] = []
        self._version = 0
        self._lock = threading.Lock()
        self.app = Starlette(
            routes=[
                Route(PREFIX, self._create, methods=["POST"]),
                Route(PREFIX + "/{name}", self._get, methods=["GET"]),
                Route(PREFIX + "/{name}", self._replace, methods=["PUT"]),
            ]
        )

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def _stored(
        self, body: dict[str, Any], namespace: str, previous: dict[str, Any] | None
    ) -> dict[str, Any]:
        spec = dict(body.get("spec") or {})
        for field in _TIME_FIELDS:
            if spec.get(field) is not None:
                spec[field] = _micro_time(spec[field])
        meta = dict(body.get("metadata") or {})
        meta["namespace"] = namespace
        meta["resourceVersion"] = self._next_version()
        meta["uid"] = previous["metadata"]["uid"] if previous else str(uuid.uuid4())
        meta["creationTimestamp"] = (
            previous["metadata"]["creationTimestamp"]
            if previous
            else datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        )
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    async def _create(self, request: Request) -> JSONResponse:
        namespace = request.path_params["namespace"]
        body = json.loads(await request.body())
        name = body.get("metadata", {}).get("name")
        with self._lock:
            self.requests.append(("POST", f"{namespace}/{name}", body))
            if not name:
                return _status(422, "Invalid", "metadata.name: Required value")
            if (namespace, name) in self.leases:
                return _status(409, "AlreadyExists", f'leases.coordination.k8s.io "{name}" already exists')
            stored = self._stored(body, namespace, None)
            self.leases[(namespace, name)] = stored
            return JSONResponse(stored, status_code=201)

    async def _get(self, request: Request) -> JSONResponse:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        with self._lock:
            self.requests.append(("GET", f"{namespace}/{name}", None))
            lease = self.leases.get((namespace, name))
            if lease is None:
                return _status(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found')
            return JSONResponse(lease)

    async def _replace(self, request: Request) -> JSONResponse:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        body = json.loads(await request.body())
        with self._lock:
            self.requests.append(("PUT", f"{namespace}/{name}", body))
            current = self.leases.get((namespace, name))
            if current is None:
                return _status(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found')
            if body.get("metadata", {}).get("name") != name:
                return _status(400, "BadRequest", "the name of the object does not match the name on the URL")
            expected = body.get("metadata", {}).get("resourceVersion")
            if expected is not None and expected != current["metadata"]["resourceVersion"]:
                return _status(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}": the object has '
                    "been modified; please apply your changes to the latest version and try again",
                )
            stored = self._stored(body, namespace, current)
            self.leases[(namespace, name)] = stored
            return JSONResponse(stored)


class FakeKubeServer:
    """The fake on 127.0.0.1 (a free port), served by uvicorn in a daemon thread."""

    def __init__(self) -> None:
        self.api = FakeLeaseAPI()
        self._server = uvicorn.Server(
            uvicorn.Config(self.api.app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        )
        self._thread = threading.Thread(target=self._server.run, name="fake-kube-api", daemon=True)
        self.url = ""

    def __enter__(self) -> FakeKubeServer:
        self._thread.start()
        deadline = time.monotonic() + 60  # a hang bound: a busy machine starts it late
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the fake Kubernetes API did not start")
            time.sleep(0.01)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __exit__(self, *_exc: object) -> None:
        self.stop()

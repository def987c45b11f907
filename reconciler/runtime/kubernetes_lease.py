"""``--lease kubernetes``: a ``coordination.k8s.io/v1`` Lease, taken and renewed as controller-runtime's
leader election does (client-go's ``LeaseLock``), through the official ``kubernetes`` client.

- The Lease names its holder (``spec.holderIdentity``), when it was taken and last renewed, and for how
  long a renewal holds (``leaseDurationSeconds``).
- Every write is a compare-and-swap on ``metadata.resourceVersion``: ``replace`` with the version read
  last, so two standbys that both see an expired Lease cannot both take it (the API server answers the
  second with 409 Conflict). Contention is an answer (``False``), never an exception.
- Expiry is judged on the recorded ``renewTime`` + duration (wall clock, as client-go does; keep the
  nodes' clocks in NTP sync). Our own right to write is judged on the monotonic clock: ``holds()`` turns
  False a safety margin before the Lease could expire, whatever happens to the API server.
- ``release()`` empties the holder and shortens the duration to 1 s, so a standby takes over at once.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from reconciler.logging import get_logger
from reconciler.runtime.lease import default_identity

log = get_logger(component="lease")

DEFAULT_NAME = "paletteai-reconciler"
DEFAULT_DURATION = 60.0
DEFAULT_MARGIN = 10.0  # stop writing this long before the Lease could expire
_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def default_namespace() -> str:
    """``POD_NAMESPACE``, else the service account's namespace file, else ``default``."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(_NAMESPACE_FILE, encoding="utf-8") as handle:
            return handle.read().strip() or "default"
    except OSError:
        return "default"


def api_client_from_environment() -> k8s.ApiClient:
    """In a pod: its service account; elsewhere: the kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``)."""
    try:
        k8s_config.load_incluster_config()  # type: ignore[no-untyped-call]
    except k8s_config.ConfigException:
        k8s_config.load_kube_config()  # type: ignore[no-untyped-call]
    return k8s.ApiClient()


def _now() -> datetime:
    return datetime.now(UTC)


class KubernetesLease:
    """One ``coordination.k8s.io/v1`` Lease in ``namespace`` (see the module docstring)."""

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        namespace: str,
        name: str = DEFAULT_NAME,
        identity: str | None = None,
        duration: float = DEFAULT_DURATION,
        margin: float = DEFAULT_MARGIN,
        timeout: float = 10.0,
    ) -> None:
        if margin >= duration:
            raise ValueError("the safety margin must be shorter than the lease duration")
        self._api = k8s.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.duration = duration
        self.margin = margin
        self._timeout = timeout
        self._lock = threading.Lock()
        self._renewed_at: float | None = None  # monotonic time of our last successful write
        self._holder: str | None = None

    def __repr__(self) -> str:
        return f"KubernetesLease({self.namespace}/{self.name}, identity={self.identity!r})"

    # -- the Lease protocol -------------------------------------------------------------------------

    def acquire(self) -> bool:
        """Take the Lease, or renew it if we hold it. True iff we hold it now."""
        with self._lock:
            started = time.monotonic()
            try:
                held = self._try_acquire()
            except ApiException as exc:
                log.warning(
                    "lease not renewed",
                    lease=f"{self.namespace}/{self.name}",
                    status=exc.status,
                    reason=exc.reason,
                )
                held = False
            except Exception as exc:  # transport errors: the API server is unreachable
                log.warning(
                    "lease not renewed", lease=f"{self.namespace}/{self.name}", error=type(exc).__name__
                )
                held = False
            if held:
                self._renewed_at = started  # counted from before the request: never optimistic
            return held and self._holds_locked()

    def holds(self) -> bool:
        """True while it is safe to write: we hold the Lease and it cannot have expired yet.

        Never waits for the lock: ``/readyz`` and the webhook ask while :meth:`acquire` may be waiting
        on the API server (one attribute read is atomic)."""
        return self._holds_locked()

    def release(self) -> None:
        """Give the Lease up (best effort) so that a standby takes over at once."""
        with self._lock:
            if self._renewed_at is None:
                return
            self._renewed_at = None
            try:
                lease = self._read()
                if lease is None or lease.spec.holder_identity != self.identity:
                    return
                lease.spec.holder_identity = None
                lease.spec.lease_duration_seconds = 1
                lease.spec.renew_time = _now()
                self._api.replace_namespaced_lease(
                    self.name, self.namespace, lease, _request_timeout=self._timeout
                )
                self._holder = None
            except Exception as exc:
                log.warning("lease not released; it expires by itself", error=type(exc).__name__)

    def holder(self) -> str | None:
        """Who holds the Lease, as last seen (without waiting for the lock, as :meth:`holds`)."""
        return self._holder

    # -- internals ----------------------------------------------------------------------------------

    def _holds_locked(self) -> bool:
        renewed = self._renewed_at  # read once: another thread may set it to None meanwhile
        if renewed is None:
            return False
        return time.monotonic() - renewed < self.duration - self.margin

    def _read(self) -> Any:
        try:
            return self._api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self._timeout)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _spec(self, acquired: datetime, transitions: int) -> k8s.V1LeaseSpec:
        return k8s.V1LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=int(self.duration),
            acquire_time=acquired,
            renew_time=_now(),
            lease_transitions=transitions,
        )

    def _try_acquire(self) -> bool:
        lease = self._read()
        if lease is None:
            body = k8s.V1Lease(
                metadata=k8s.V1ObjectMeta(name=self.name, namespace=self.namespace),
                spec=self._spec(_now(), 0),
            )
            try:
                self._api.create_namespaced_lease(self.namespace, body, _request_timeout=self._timeout)
            except ApiException as exc:
                if exc.status == 409:  # another instance created it first
                    self._renewed_at = None
                    return False
                raise
            self._holder = self.identity
            log.info("lease acquired", lease=f"{self.namespace}/{self.name}", identity=self.identity)
            return True
        spec = lease.spec or k8s.V1LeaseSpec()
        self._holder = spec.holder_identity
        transitions = spec.lease_transitions or 0
        if spec.holder_identity == self.identity and self._renewed_at is not None:
            new_spec = self._spec(spec.acquire_time or _now(), transitions)
        elif spec.holder_identity and not self._expired(spec):
            self._renewed_at = None
            return False
        else:
            new_spec = self._spec(_now(), transitions + 1)
        lease.spec = new_spec
        try:
            # replace carries metadata.resourceVersion as read: the API server's compare-and-swap.
            self._api.replace_namespaced_lease(
                self.name, self.namespace, lease, _request_timeout=self._timeout
            )
        except ApiException as exc:
            if exc.status == 409:
                self._renewed_at = None
                return False
            raise
        if self._holder != self.identity:
            log.info(
                "lease acquired",
                lease=f"{self.namespace}/{self.name}",
                identity=self.identity,
                previous=self._holder,
            )
        self._holder = self.identity
        return True

    def _expired(self, spec: k8s.V1LeaseSpec) -> bool:
        renewed = spec.renew_time or spec.acquire_time
        if renewed is None:
            return True
        if renewed.tzinfo is None:
            renewed = renewed.replace(tzinfo=UTC)
        return renewed + timedelta(seconds=spec.lease_duration_seconds or self.duration) < _now()

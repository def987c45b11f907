"""The reconciler's HTTP side: the git webhook, ``/healthz``, ``/readyz`` and ``/metrics``.

By job: :mod:`~reconciler.server.app` the server (routes, probes, uvicorn in a background thread),
:mod:`~reconciler.server.webhook` the webhook (verify a delivery, start a pass, coalesce a burst),
:mod:`~reconciler.server.connections` the deadline that keeps slow clients from holding connections,
:mod:`~reconciler.server.config` the listen address and the webhook secret from the environment.
"""

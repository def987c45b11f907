"""The Palette client's retries: the project's one back-off (``reconciler.retry``)."""

from reconciler.retry import Backoff, RetryPolicy

__all__ = ["Backoff", "RetryPolicy"]

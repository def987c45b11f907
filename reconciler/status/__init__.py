"""Status of the reconciled resources, written to a status branch of the config repository."""

from reconciler.status.store import StatusError, StatusStore, format_message

__all__ = ["StatusError", "StatusStore", "format_message"]

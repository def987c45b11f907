"""Cheaper pickles for the objects the cache of checked documents keeps (``source.documents``): tens of
thousands of them are rebuilt on every warm load, and the default ways cost a Python call that walks
the fields (``dataclasses``' state of a slots class) or builds a state dict (pydantic's) for each.
:func:`dumps_sharing` also writes each distinct frozen model once: the thousands of equal references
and requests of a repository come back as one object each."""

from __future__ import annotations

import io
import pickle
from dataclasses import fields
from operator import attrgetter, getitem
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel

T = TypeVar("T")

_set = object.__setattr__


def by_fields(cls: type[T]) -> type[T]:
    """A dataclass decorator (over ``@dataclass``): an instance pickles as a call of its class with its
    fields in order. Only for classes whose every field is an ``__init__`` argument and whose
    ``__init__`` does nothing else."""
    names = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    if any(not f.init for f in fields(cls)) or len(names) < 2:  # type: ignore[arg-type]
        raise TypeError(f"{cls.__name__}: by_fields needs two fields or more, all of them arguments")
    values = attrgetter(*names)

    def __reduce__(self: Any) -> tuple[type[T], tuple[Any, ...]]:
        return type(self), values(self)

    cls.__reduce__ = __reduce__  # type: ignore[method-assign]
    return cls


def _model(cls: type[BaseModel], values: dict[str, Any], fields_set: set[str]) -> BaseModel:
    model = cls.__new__(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", fields_set)
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


def _model_with_state(cls: type[BaseModel], state: dict[Any, Any]) -> BaseModel:
    model = cls.__new__(cls)
    model.__setstate__(state)
    return model


def reduce_model(model: BaseModel) -> tuple[Any, ...]:
    """A pydantic model's pickle without its state dict (the common case: no extra fields, no private
    attributes); pydantic's own state otherwise."""
    if model.__pydantic_extra__ is None and model.__pydantic_private__ is None:
        return _model, (type(model), model.__dict__, model.__pydantic_fields_set__)
    return _model_with_state, (type(model), model.__getstate__())


class _SharingPickler(pickle.Pickler):
    """Equal models (the same class, the same pickle) written once; the later ones as a reference to the
    first (``getitem((first,), 0)``: no Python call when loaded). Safe because the models are frozen."""

    def __init__(self, file: io.BytesIO, unshared: tuple[type, ...]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.unshared = unshared
        self.first: dict[tuple[type, bytes], object] = {}

    def reducer_override(self, obj: Any) -> Any:
        from pydantic import BaseModel

        if isinstance(obj, BaseModel) and not isinstance(obj, self.unshared):
            key = (type(obj), pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
            first = self.first.setdefault(key, obj)
            if first is not obj:
                return getitem, ((first,), 0)
        return NotImplemented


def dumps_sharing(value: object, unshared: tuple[type, ...] = ()) -> bytes:
    """``pickle.dumps(value)`` with every distinct pydantic model but those of ``unshared`` written once
    (equal ones are loaded as one object; what a whole resource is, say, may stay one object each)."""
    out = io.BytesIO()
    _SharingPickler(out, unshared).dump(value)
    return out.getvalue()

"""A faster ``__init__`` for the frozen, slotted dataclasses built once or more per score (scorer
runs, score and decision rows)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")

_NOTHING = object()  # stands for "not given" where a field's default comes from a factory


def stored_through_slots(cls: type[T]) -> type[T]:
    """Give a frozen, slotted, keyword-only dataclass ``cls`` an ``__init__`` that stores each
    field through its slot's descriptor.

    The ``__init__`` dataclasses generates for a frozen class calls ``object.__setattr__`` per
    field, looking both up each time: building a 37-field score row cost 3 µs, a tenth of a code
    score. This one takes the same keyword arguments with the same defaults (factories are
    called per instance) and leaves instances frozen. Apply it above ``@dataclass``.
    """
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: a dataclass without __post_init__ expected")
    params, body = [], []
    scope: dict[str, Any] = {"_NOTHING": _NOTHING}
    for f in dataclasses.fields(cls):
        if not f.init or not f.kw_only:
            raise TypeError(f"{cls.__name__}.{f.name}: keyword-only fields in __init__ expected")
        scope[f"_set_{f.name}"] = cls.__dict__[f.name].__set__  # the slot's member descriptor
        if f.default is not dataclasses.MISSING:
            scope[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_NOTHING")
            body.append(f"    if {f.name} is _NOTHING:\n        {f.name} = _factory_{f.name}()")
        else:
            params.append(f.name)
        body.append(f"    _set_{f.name}(self, {f.name})")
    source = f"def __init__(self, *, {', '.join(params)}):\n" + "\n".join(body) + "\n"
    exec(source, scope)  # as dataclasses builds its own __init__
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses assigning to a method
    return cls

"""Frozen value classes that cost nothing to define.

``dataclasses`` writes and compiles an ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__`` and ``__delattr__`` for every class as its module is imported: about 1 ms a
class on Python 3.11, which over rendezvous's seventy value classes was about a third
of a daemon's start-up CPU. A record class shares one implementation of each method, driven by its
tuple of field names, so defining one costs microseconds. Creating an instance takes about
twice as long as a dataclass's (3.4 against 1.7 microseconds, Python 3.13).

    @record
    class Point:
        x: int
        y: int = 0
        tags: frozenset[str] = field(default_factory=frozenset)

Records are frozen (assignment raises :class:`FrozenError`), compare equal when of the same
class with equal fields, hash by their fields, order by their fields with ``order=True``,
support ``match`` by position, run ``__post_init__`` after ``__init__``, and inherit the
fields of a record base class. :func:`replace` and :func:`fields` work as their
``dataclasses`` namesakes, :func:`asdict` too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_kwargs: Any) -> Callable[[Any], Any]:
        return lambda decorated: decorated


__all__ = ["FrozenError", "asdict", "field", "fields", "record", "replace"]

T = TypeVar("T")

_NAMES = "__record_fields__"


class FrozenError(AttributeError):
    """An attempt to set or delete a field of a record."""


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A field whose default is made by calling ``default_factory`` for each instance."""
    return _Factory(default_factory)


def fields(cls_or_record: Any) -> tuple[str, ...]:
    """The names of a record's fields, in order."""
    names: tuple[str, ...] = getattr(cls_or_record, _NAMES)
    return names


def replace(instance: T, **changes: Any) -> T:
    """A copy of ``instance`` with ``changes`` applied (and ``__post_init__`` run again)."""
    values = {name: getattr(instance, name) for name in fields(instance)}
    values.update(changes)
    return type(instance)(**values)


def asdict(value: Any) -> Any:
    """A record as a dict of its fields, records in it (and in its tuples, lists and dicts)
    too, as ``dataclasses.asdict`` does: for JSON."""
    if hasattr(type(value), _NAMES):
        return {name: asdict(getattr(value, name)) for name in fields(value)}
    if isinstance(value, (list, tuple)):
        return type(value)(asdict(item) for item in value)
    if isinstance(value, dict):
        return {asdict(key): asdict(item) for key, item in value.items()}
    return value


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    names: tuple[str, ...] = getattr(cls, _NAMES)
    if len(args) > len(names):
        raise TypeError(f"{cls.__qualname__}() takes {len(names)} arguments but {len(args)} were given")
    values = dict(zip(names, args))
    defaults: dict[str, Any] = cls.__record_defaults__
    for name in names[len(args):]:
        if name in kwargs:
            values[name] = kwargs.pop(name)
        elif name in defaults:
            default = defaults[name]
            values[name] = default.make() if isinstance(default, _Factory) else default
        else:
            raise TypeError(f"{cls.__qualname__}() missing argument {name!r}")
    if kwargs:
        name = next(iter(kwargs))
        problem = "got multiple values for" if name in values else "got an unexpected keyword"
        raise TypeError(f"{cls.__qualname__}() {problem} argument {name!r}")
    self.__dict__.update(values)
    if cls.__record_post_init__:
        self.__post_init__()


def _values(self: Any) -> tuple[Any, ...]:
    instance = self.__dict__
    return tuple([instance[name] for name in getattr(type(self), _NAMES)])


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={value!r}" for name, value in zip(getattr(type(self), _NAMES), _values(self)))
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return self is other or _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(_values(self))


def _frozen(self: Any, name: str, *_value: Any) -> None:
    raise FrozenError(f"cannot assign to field {name!r} of a {type(self).__qualname__}")


def _comparison(compare: Callable[[tuple[Any, ...], tuple[Any, ...]], bool]) -> Callable[[Any, Any], Any]:
    def method(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return compare(_values(self), _values(other))

    return method


_ORDER = {
    "__lt__": _comparison(lambda a, b: a < b),
    "__le__": _comparison(lambda a, b: a <= b),
    "__gt__": _comparison(lambda a, b: a > b),
    "__ge__": _comparison(lambda a, b: a >= b),
}


def _build(cls: type, repr: bool, order: bool) -> type:
    names: list[str] = []
    defaults: dict[str, Any] = {}
    for base in reversed(cls.__mro__[1:]):
        for name in getattr(base, _NAMES, ()):
            if name not in names:
                names.append(name)
        defaults.update(getattr(base, "__record_defaults__", {}))
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if "ClassVar" in str(annotation):
            continue
        if name not in names:
            names.append(name)
        if name in cls.__dict__:
            defaults[name] = cls.__dict__[name]
            if isinstance(defaults[name], _Factory):
                delattr(cls, name)
        elif name in defaults:
            del defaults[name]
    required_after_default = [n for i, n in enumerate(names) if n not in defaults and any(m in defaults for m in names[:i])]
    if required_after_default:
        raise TypeError(f"{cls.__qualname__}: field {required_after_default[0]!r} without a default follows one with a default")
    setattr(cls, _NAMES, tuple(names))
    setattr(cls, "__record_defaults__", defaults)
    setattr(cls, "__match_args__", tuple(names))
    setattr(cls, "__record_post_init__", hasattr(cls, "__post_init__"))
    methods = {"__init__": _init, "__eq__": _eq, "__hash__": _hash, "__setattr__": _frozen, "__delattr__": _frozen}
    if repr:
        methods["__repr__"] = _repr
    if order:
        methods.update(_ORDER)
    for name, method in methods.items():
        if name not in cls.__dict__ or (name == "__hash__" and cls.__dict__[name] is None):
            setattr(cls, name, method)
    return cls


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: Optional[type[T]] = None, *, repr: bool = True, order: bool = False) -> Any:
    """Make ``cls`` a frozen record; ``@record`` or ``@record(order=True, repr=False)``."""
    if cls is None:
        return lambda decorated: _build(decorated, repr, order)
    return _build(cls, repr, order)


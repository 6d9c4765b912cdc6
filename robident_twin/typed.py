"""Typed configuration, the generic part (on the floor: every layer may use it, so that each
layer owns the schemas of its own config, e.g. the HAL's in :mod:`hal.config`): walk a (frozen) dataclass schema over a plain
mapping, check every value's type, range and choice, refuse unknown keys, and build the
typed object. Errors name the full key, the value and what was expected.

Field metadata (see :func:`key`): ``ge``/``gt``/``le``/``lt`` (numeric bounds, applied to
every element of a list), ``choices`` and ``optional_key`` (a key that conf/ does not
write: it is left out of :func:`to_plain` while it keeps its default)."""
from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
import types
import typing
from collections.abc import Mapping
from typing import Any, Union

from .errors import ConfigError

MISSING = dataclasses.MISSING


def key(default: Any = MISSING, *, ge=None, gt=None, le=None, lt=None, choices=None, optional_key: bool = False,
        per_joint: bool = False):
    """A schema field: its default (a list or dict default is copied per instance) and its checks.
    ``per_joint`` (with type ``Any``): null, a number or a list of numbers (one per joint)."""
    meta = {k: v for k, v in dict(ge=ge, gt=gt, le=le, lt=lt, choices=choices).items() if v is not None}
    meta["optional_key"] = optional_key
    meta["per_joint"] = per_joint
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    if default is MISSING:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


class Errors:
    """Every problem found in one pass (so a user fixes them all at once)."""

    def __init__(self):
        self.items: list[str] = []

    def add(self, path: str, value: Any, expected: str) -> None:
        self.items.append(f"{path or '<config>'}: expected {expected}, got {value!r}")

    def raise_if_any(self) -> None:
        if self.items:
            more = "" if len(self.items) == 1 else f" (and {len(self.items) - 1} more: " + "; ".join(self.items[1:]) + ")"
            raise ConfigError(self.items[0] + more)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _describe(tp) -> str:
    origin = typing.get_origin(tp)
    if tp is Any:
        return "any value"
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a finite number"
    if tp is str:
        return "a string"
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        parts = [_describe(a) for a in args if a is not type(None)]
        return (" or ".join(parts)) + (" or null" if type(None) in args else "")
    if origin in (list, tuple):
        return f"a list of {_describe(typing.get_args(tp)[0]).removeprefix('a ').removeprefix('an ')}s"
    if origin in (dict, Mapping) or tp is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return f"a mapping with keys {', '.join(f.name for f in dataclasses.fields(tp))}"
    return getattr(tp, "__name__", str(tp))


def _bounds_text(meta: Mapping[str, Any]) -> str:
    parts = []
    if "gt" in meta:
        parts.append(f"> {meta['gt']}")
    if "ge" in meta:
        parts.append(f">= {meta['ge']}")
    if "lt" in meta:
        parts.append(f"< {meta['lt']}")
    if "le" in meta:
        parts.append(f"<= {meta['le']}")
    return " and ".join(parts)


class _Bad(Exception):
    pass


def _scalar(tp, value, meta):
    """Convert one scalar or raise _Bad (the caller reports the expectation)."""
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _Bad
    if tp is int:
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
        raise _Bad
    if tp is float:
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value)):
            return float(value)
        raise _Bad
    if tp is str:
        if isinstance(value, str):
            return value
        raise _Bad
    raise TypeError(f"schema type {tp!r} is not supported")


def _in_range(x, meta) -> bool:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return True
    return not (("ge" in meta and not x >= meta["ge"]) or ("gt" in meta and not x > meta["gt"])
                or ("le" in meta and not x <= meta["le"]) or ("lt" in meta and not x < meta["lt"]))


def convert(tp, value, path: str, errors: Errors, meta: Mapping[str, Any] | None = None):
    """``value`` checked against the type ``tp`` (and ``meta``'s range/choices); problems go to ``errors``."""
    meta = meta or {}
    origin = typing.get_origin(tp)
    if tp is Any and meta.get("per_joint"):
        if value is None:
            return None
        bounds = f" {_bounds_text(meta)}" if _bounds_text(meta) else ""
        if isinstance(value, (list, tuple)) and value:
            return convert(tuple[float, ...], value, path, errors, meta)
        try:
            x = _scalar(float, value, meta)
        except _Bad:
            errors.add(path, value, f"null, a finite number{bounds} or a per-joint list of them")
            return None
        if not _in_range(x, meta):
            errors.add(path, value, f"a number{bounds}")
            return None
        return x
    if dataclasses.is_dataclass(tp):
        return build(tp, value, path, errors)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            errors.add(path, value, _describe(tp))
            return None
        for a in args:
            if a is type(None):
                continue
            trial = Errors()
            out = convert(a, value, path, trial, meta)
            if not trial.items:
                return out
            if len(args) - (type(None) in args) == 1 or _type_matches(a, value):
                errors.items.extend(trial.items)  # the right kind of value, wrong content: its own message
                return None
        errors.add(path, value, _describe(tp) + (f" ({_bounds_text(meta)})" if _bounds_text(meta) else ""))
        return None
    if origin in (list, tuple):
        (item_tp,) = typing.get_args(tp)[:1]
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
            errors.add(path, value, _describe(tp))
            return None
        return tuple(convert(item_tp, v, f"{path}[{i}]", errors, meta) for i, v in enumerate(value))
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            errors.add(path, value, "a mapping")
            return None
        return dict(value)
    try:
        x = _scalar(tp, value, meta)
    except _Bad:
        errors.add(path, value, _describe(tp) + (f" {_bounds_text(meta)}" if _bounds_text(meta) else "")
                   + (f" among {list(meta['choices'])}" if "choices" in meta else ""))
        return None
    if not _in_range(x, meta):
        errors.add(path, value, f"{_describe(tp)} {_bounds_text(meta)}")
        return None
    if "choices" in meta and x not in meta["choices"]:
        errors.add(path, value, f"one of {list(meta['choices'])}")
        return None
    return x


def _type_matches(tp, value) -> bool:
    """Whether ``value`` is of the kind ``tp`` describes (used to pick a Union member's message)."""
    origin = typing.get_origin(tp)
    if origin in (list, tuple):
        return isinstance(value, (list, tuple))
    if dataclasses.is_dataclass(tp) or origin in (dict, Mapping):
        return isinstance(value, Mapping)
    if tp in (int, float):
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    return False


def build(schema: type, value: Any, path: str, errors: Errors):
    """The dataclass ``schema`` built from the mapping ``value`` (missing keys take their
    defaults, unknown keys are errors). Returns None when something was wrong."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        errors.add(path, value, _describe(schema))
        return None
    hints = typing.get_type_hints(schema)
    fields = {f.name: f for f in dataclasses.fields(schema) if f.init}
    n0 = len(errors.items)
    for k in value:
        if k not in fields:
            close = difflib.get_close_matches(str(k), list(fields), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            errors.items.append(f"{_join(path, str(k))}: unknown key{hint}; expected one of {sorted(fields)}")
    kwargs = {}
    for name, f in fields.items():
        if name in value:
            kwargs[name] = convert(hints[name], value[name], _join(path, name), errors, f.metadata)
        elif f.default is MISSING and f.default_factory is MISSING:
            errors.items.append(f"{_join(path, name)}: missing; expected {_describe(hints[name])}")
    if len(errors.items) > n0:
        return None
    obj = schema(**kwargs)
    check = getattr(obj, "check", None)
    if check is not None:
        check(path, errors)
    return obj if len(errors.items) == n0 else None


def to_plain(obj: Any) -> Any:
    """The plain (JSON/YAML-like) form of a schema object: dicts and lists, as conf/ writes it."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if f.name == "extra_groups":  # RunConfig: registered groups are top-level keys
                out.update({k: to_plain(g) for k, g in v.items()})
            elif not (f.metadata.get("optional_key")
                      and v == (f.default if f.default is not MISSING else f.default_factory())):
                out[f.name] = to_plain(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: to_plain(v) for k, v in obj.items()}
    return obj


def coerce(schema: type, value: Any, path: str, *, partial: bool = False):
    """``value`` as the typed ``schema`` object: an instance passes through untouched (the
    pipeline hands typed objects down), a mapping (the Python API's convenience) is validated
    once here like the CLI edge does (ConfigError naming ``path``). ``partial``: a caller that
    reads only some keys may leave required ones out (they are None)."""
    if isinstance(value, schema):
        return value
    if partial and isinstance(value, Mapping):
        required = [f.name for f in dataclasses.fields(schema)
                    if f.init and f.default is MISSING and f.default_factory is MISSING]
        value = {**{k: None for k in required}, **value}
        hints = typing.get_type_hints(schema)
        errors = Errors()
        kwargs = {}
        for k, v in value.items():
            f = next((f for f in dataclasses.fields(schema) if f.name == k and f.init), None)
            if f is None:
                close = difflib.get_close_matches(str(k), [f.name for f in dataclasses.fields(schema)], n=1)
                errors.items.append(f"{_join(path, str(k))}: unknown key{f' (did you mean {close[0]!r}?)' if close else ''}")
            elif v is None and k in required:
                kwargs[k] = None
            else:
                kwargs[k] = convert(hints[k], v, _join(path, k), errors, f.metadata)
        errors.raise_if_any()
        return schema(**kwargs)
    errors = Errors()
    out = build(schema, value, path, errors)
    errors.raise_if_any()
    return out

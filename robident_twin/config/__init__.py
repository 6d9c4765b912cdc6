"""Typed configuration, validated once at the CLI edge.

``validate(cfg) -> RunConfig`` checks every group and task key of conf/ (types, ranges,
choices, unknown keys, checks across groups) and returns frozen dataclasses; any problem
raises :class:`~robident_twin.errors.ConfigError` naming the full key, the value and the
expectation. The CLI calls it before a task runs; ``pipeline.identify`` calls it on a dict.

A config group added later registers its schema with :func:`register_group`::

    @dataclass(frozen=True)
    class TwinConfig: ...
    register_group("twin", TwinConfig)          # or {"option": Schema, ...}, discriminator="kind"

The schemas are also stored in Hydra's ConfigStore (group ``schema``, e.g. ``schema/backend/mujoco``).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .check import Errors, build, to_plain
from . import schema as schema_module
from .schema import BACKENDS, ESTIMATORS, FRICTIONS, TRAJECTORIES, RunConfig

__all__ = ["ConfigError", "RunConfig", "validate", "register_group", "to_plain", "as_dictconfig", "GROUPS"]


@dataclass(frozen=True)
class Group:
    """A config group's schema: one dataclass, or one per option chosen by ``discriminator``."""
    options: Any
    discriminator: str | None = None

    def build(self, name: str, value: Any, errors: Errors):
        if self.discriminator is None:
            return build(self.options, value, name, errors)
        if not isinstance(value, Mapping):
            errors.add(name, value, f"a mapping with a '{self.discriminator}' key")
            return None
        which = value.get(self.discriminator)
        if which not in self.options:
            errors.add(f"{name}.{self.discriminator}", which, f"one of {sorted(self.options)}")
            return None
        return build(self.options[which], value, name, errors)


#: groups whose option is picked by a key; the other RunConfig fields are plain dataclasses
GROUPS: dict[str, Group] = {
    "backend": Group(BACKENDS, "name"),
    "estimator": Group(ESTIMATORS, "name"),
    "friction": Group(FRICTIONS, "kind"),
    "trajectory": Group(TRAJECTORIES, "kind"),
}
#: groups registered by other modules (not RunConfig fields): name -> Group
EXTRA_GROUPS: dict[str, Group] = {}


def register_group(name: str, schema: Any, discriminator: str | None = None) -> None:
    """Register the schema of a config group added later (a top-level key of the config):
    a dataclass, or ``{option: dataclass}`` with the ``discriminator`` key naming the option."""
    if name in {f.name for f in dataclasses.fields(RunConfig)}:
        raise ValueError(f"config group {name!r} is a RunConfig field already")
    if isinstance(schema, Mapping) and discriminator is None:
        raise ValueError("a group with several option schemas needs a discriminator key")
    EXTRA_GROUPS[name] = Group(dict(schema) if isinstance(schema, Mapping) else schema, discriminator)
    _store_group(name, EXTRA_GROUPS[name])


def _plain(cfg: Any) -> dict:
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        try:
            return OmegaConf.to_container(cfg, resolve=True)
        except Exception as exc:  # an interpolation that does not resolve
            raise ConfigError(f"{getattr(exc, 'full_key', '') or 'config'}: {exc}") from None
    if isinstance(cfg, Mapping):
        return dict(cfg)
    raise ConfigError(f"config: expected a mapping or a RunConfig, got {type(cfg).__name__}")


def validate(cfg: Any) -> RunConfig:
    """The typed run config of ``cfg`` (a Hydra DictConfig, a mapping or a RunConfig);
    ConfigError names every bad key, its value and what was expected."""
    if isinstance(cfg, RunConfig):
        return cfg
    d = _plain(cfg)
    errors = Errors()
    fields = {f.name for f in dataclasses.fields(RunConfig)} - {"extra_groups"}
    kwargs, extra = {}, {}
    for k in list(d):
        if k in GROUPS:
            kwargs[k] = GROUPS[k].build(k, d[k], errors)
        elif k in EXTRA_GROUPS:
            extra[k] = EXTRA_GROUPS[k].build(k, d[k], errors)
        elif k in fields:
            kwargs[k] = d[k]
        else:
            import difflib

            close = difflib.get_close_matches(str(k), sorted(fields | set(EXTRA_GROUPS)), n=1)
            errors.items.append(f"{k}: unknown key{f' (did you mean {close[0]!r}?)' if close else ''}; expected "
                                f"one of {sorted(fields | set(EXTRA_GROUPS))}")
    for k in ("backend", "estimator"):
        if k not in d:
            errors.items.append(f"{k}: missing; expected a '{GROUPS[k].discriminator}' key among "
                                f"{sorted(GROUPS[k].options)}")
    errors.raise_if_any()
    # the groups built above pass through as they are; build() checks the task keys
    hints_any = {k: v for k, v in kwargs.items() if k in GROUPS}
    rest = {k: v for k, v in kwargs.items() if k not in GROUPS}
    run = build(_RunKeys, rest, "", errors)
    errors.raise_if_any()
    run = RunConfig(**{f.name: getattr(run, f.name) for f in dataclasses.fields(_RunKeys)}, **hints_any,
                    extra_groups=extra)
    run.check("", errors)
    errors.raise_if_any()
    return run


def _run_keys_schema():
    """RunConfig without the option-keyed groups (they are built by :data:`GROUPS`)."""
    skip = set(GROUPS) | {"extra_groups"}
    fields = [(f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory,
                                                 metadata=f.metadata))
              for f in dataclasses.fields(RunConfig) if f.name not in skip]
    cls = dataclasses.make_dataclass("RunKeys", fields, frozen=True)
    cls.__module__ = schema_module.__name__  # its annotations name the schema module's classes
    return cls


_RunKeys = _run_keys_schema()


def as_dictconfig(run: RunConfig):
    """The validated config as a (struct, read-only) DictConfig for tasks written against one."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(to_plain(run))
    OmegaConf.set_struct(cfg, True)
    OmegaConf.set_readonly(cfg, True)
    return cfg


# ---------------------------------------------------------------------------- Hydra's ConfigStore
from hydra.core.config_store import ConfigNode, ConfigStore  # noqa: E402  (hydra is a dependency)


class LazySchemaNode(ConfigNode):
    """The ConfigNode ``ConfigStore.store`` would make, with its DictConfig built from the
    dataclass when Hydra first reads it: building them all (``OmegaConf.structured``) cost
    every command line about 0.1 s CPU, also those that never read one. Hydra's shallow copies
    of the node (``ConfigStore.load``) share the one built DictConfig, as they shared the stored one."""

    def __init__(self, name: str, schema: Any, group: str):
        self.__dict__.update(name=name, group=group, package=None, provider=None, _built=[], _schema=schema)

    @property
    def node(self):
        if "_node" in self.__dict__:  # set on a copy (ConfigStore.load)
            return self.__dict__["_node"]
        if not self._built:
            from omegaconf import OmegaConf

            self._built.append(OmegaConf.structured(self._schema))
        return self._built[0]

    @node.setter
    def node(self, value) -> None:
        self.__dict__["_node"] = value


def _store(group: str, name: str, schema: Any) -> None:
    """``ConfigStore.instance().store(group=group, name=name, node=schema)``, built on first read."""
    cur = ConfigStore.instance().repo
    for d in group.split("/"):
        cur = cur.setdefault(d, {})
    cur[f"{name}.yaml"] = LazySchemaNode(f"{name}.yaml", schema, group)


def _store_group(name: str, group: Group) -> None:
    options = group.options if isinstance(group.options, Mapping) else {name: group.options}
    for opt, schema in options.items():
        _store(f"schema/{name}", opt, schema)


def _store_all() -> None:
    from . import schema as s

    for name, group in GROUPS.items():
        _store_group(name, group)
    for f in dataclasses.fields(_RunKeys):
        tp = getattr(s, f.type, None) if isinstance(f.type, str) else f.type
        if dataclasses.is_dataclass(tp):
            _store_group(f.name, Group(tp))
    _store("schema", "task_keys", _RunKeys)


def _the_store(memo) -> ConfigStore:
    return ConfigStore.instance()


def _share_store_on_copy() -> None:
    """Hydra deep-copies its config repository, the ConfigStore with every schema above included,
    once per listed group: ``robident-twin --help`` made 217 copies (about 6 s CPU). The copies only
    read the store, and ``ConfigStore.load`` deep-copies each node it hands out, so a copy of the
    (singleton) store can be the store itself. (A module function, so that the launchers that
    pickle Hydra's singletons for their workers, joblib and submitit, still can.)"""
    ConfigStore.instance().__deepcopy__ = _the_store  # copy.deepcopy looks __deepcopy__ up on the instance


_store_all()
_share_store_on_copy()

"""Typed configuration validated once at the CLI edge (robident_twin.config).

Bad values end before any work with exit code 2 and the full key named (through the real
CLI); every config in conf/ and every command of the README and the tutorial validates;
each schema refuses a wrong type and an out-of-range value."""
from __future__ import annotations

import dataclasses
import itertools
import os
import re
import shlex
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir

from robident_twin.config import EXTRA_GROUPS, RunConfig, register_group, schema, to_plain, validate
from robident_twin.errors import ConfigError
from robident_twin.paths import CONF_DIR

ROOT = Path(__file__).resolve().parents[1]
CASES = yaml.safe_load((ROOT / "tests" / "bad_inputs" / "configs" / "overrides.yaml").read_text())


@pytest.fixture(scope="module")
def composer():
    with initialize_config_dir(version_base=None, config_dir=str(CONF_DIR)):
        yield lambda *overrides: compose(config_name="config", overrides=list(overrides))


def _cli(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), ROBIDENT_DRYRUN_DIR=str(tmp_path / "records"))
    return subprocess.run([sys.executable, "-m", "robident_twin.cli", *overrides, f"hydra.run.dir={tmp_path / 'run'}"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def _assert_refused(proc: subprocess.CompletedProcess, key: str, tmp_path: Path) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    run = tmp_path / "run"  # no work: nothing but Hydra's files and FAILED.txt
    written = {p.name for p in run.iterdir()} if run.exists() else set()
    assert written <= {".hydra", "FAILED.txt", "cli.log"}, written
    assert not (tmp_path / "records").exists()


# the cases of issue 14 (Why) and issue 13, through the real entry point
ISSUE_CASES = [
    (["seed=abc"], "seed"),
    (["noise.torque_std_Nm=abc"], "noise.torque_std_Nm"),
    (["backend.control_rate_hz=fast"], "backend.control_rate_hz"),
    (["acquisition.periods=abc"], "acquisition.periods"),
    (["base.n_samples=0"], "base.n_samples"),
    (["acquisition.periods=2.7"], "acquisition.periods"),
    (["processing.decimate=0"], "processing.decimate"),
    (["noise.enabled=maybe"], "noise.enabled"),
    (["acquisition.periods=1", "estimator=wls"], "acquisition.periods"),
    (["backend=lwr_fri", "backend.port=99999"], "backend.port"),
    (["noise.torque_std_Nm=-0.5"], "noise.torque_std_Nm"),
    (["backend.control_rate_hz=nan"], "backend.control_rate_hz"),
    (["design.criterion=best"], "design.criterion"),
    (["design.method=newton"], "design.method"),
    (["estimator=nope"], "estimator"),
    (["task=identfy"], "task"),  # task is a config group (tab completion lists every task): Hydra refuses it
    (["acquisiton.periods=3"], "acquisiton.periods"),  # Hydra refuses it (struct mode): exit 2 as well
    (["+acquisiton.periods=3"], "acquisiton"),
    (["backend=sunrise_fri", "backend.step_margin=0"], "backend.step_margin"),
    (["backend=rsi", "backend.hold_cycles_on_abort=-1"], "backend.hold_cycles_on_abort"),
    (["backend=lwr_fri", "+backend.emulator.faults.delay_prob=2"], "backend.emulator.faults.delay_prob"),
    (["backend=rsi", "+backend.emulator.faults.reply_delay_s=-1"], "backend.emulator.faults.reply_delay_s"),
]


@pytest.mark.parametrize("overrides,key", ISSUE_CASES, ids=[" ".join(o) for o, _ in ISSUE_CASES])
def test_cli_refuses_a_bad_value_before_any_work(tmp_path, overrides, key):
    _assert_refused(_cli(tmp_path, *overrides), key, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c["overrides"]) for c in CASES])
def test_corpus_case_is_refused_naming_its_key(composer, case):
    with pytest.raises(ConfigError) as exc:
        validate(composer(*case["overrides"]))
    msg = str(exc.value)
    assert msg.startswith(case["key"] + ":") or f" {case['key']}:" in msg, msg


def test_corpus_is_large_enough():
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES[::11][:5], ids=lambda c: " ".join(c["overrides"]))
def test_corpus_case_through_the_cli(tmp_path, case):
    _assert_refused(_cli(tmp_path, *case["overrides"]), case["key"], tmp_path)


def _groups(name: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / name).glob("*.yaml"))


def test_every_robot_backend_estimator_combination_validates_and_round_trips(composer):
    from omegaconf import OmegaConf

    # one composition per option; the groups do not refer to each other, so a combination is
    # the default config with its three group nodes replaced (a handful of them composed in full)
    base = OmegaConf.to_container(composer(), resolve=True)
    option = {g: {o: OmegaConf.to_container(composer(f"{g}={o}"), resolve=True)[g] for o in _groups(g)}
              for g in ("robot", "backend", "estimator")}
    n = 0
    for robot, backend, estimator in itertools.product(_groups("robot"), _groups("backend"), _groups("estimator")):
        cfg = {**base, "robot": option["robot"][robot], "backend": option["backend"][backend],
               "estimator": option["estimator"][estimator]}
        if n % 37 == 0:
            assert cfg == OmegaConf.to_container(composer(f"robot={robot}", f"backend={backend}",
                                                          f"estimator={estimator}"), resolve=True)
        run = validate(cfg)
        assert isinstance(run, RunConfig) and run.robot.name == robot
        # the plain form handed to the stages is the config itself (ints written for floats aside)
        assert to_plain(run) == cfg
        n += 1
    assert n == len(_groups("robot")) * len(_groups("backend")) * len(_groups("estimator")) >= 4 * 7 * 6


@pytest.mark.parametrize("group", ["noise", "friction", "montecarlo"])
def test_every_option_of_the_other_groups_validates(composer, group):
    for option in _groups(group):
        run = validate(composer(f"{group}={option}"))
        assert run.group(group) is getattr(run, group)


def test_the_typed_object_is_typed_and_frozen(composer):
    run = validate(composer("backend.control_rate_hz=500"))
    assert isinstance(run.backend, schema.MujocoBackend) and run.backend.control_rate_hz == 500.0
    assert isinstance(run.backend.control_rate_hz, float)
    assert isinstance(run.estimator, schema.WlsEstimator) and isinstance(run.acquisition.periods, int)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.seed = 3  # type: ignore[misc]


def _doc_commands() -> list[list[str]]:
    """Every ``robident-twin ...`` command of README.md and docs/tutorial.md as Hydra overrides
    (placeholders <..> filled, sweeps reduced to their first value, hydra.* settings dropped)."""
    text = (ROOT / "README.md").read_text() + (ROOT / "docs" / "tutorial.md").read_text()
    cmds = []
    for m in re.finditer(r"robident-twin((?: +(?:'[^']*'|[+\w./<>=\-,\[\]{}:]+))+)", text):
        args = m.group(1)
        args = re.sub(r"<[^>]*>", "x", re.sub(r"robot=<[^>]*>", "robot=iiwa14", re.sub(r"port=<[^>]*>", "port=30001", args)))
        try:
            words = shlex.split(args)
        except ValueError:
            continue
        if not words or any(not ("=" in w or w == "-m") for w in words):
            continue  # prose ("robident-twin is a ...")
        over = [w if "{" in w or "[" in w else w.split(",")[0] for w in words
                if w != "-m" and not w.startswith(("hydra.", "hydra/"))]
        cmds.append(over)
    return cmds


def test_every_documented_command_validates(composer):
    cmds = _doc_commands()
    assert len(cmds) >= 40, cmds
    for over in cmds:
        validate(composer(*over))


def test_identify_validates_a_dict_before_any_work(tmp_path, composer):
    from omegaconf import OmegaConf

    from robident_twin.pipeline import identify

    cfg = OmegaConf.to_container(composer(), resolve=True)
    cfg["processing"]["decimate"] = 0
    with pytest.raises(ConfigError, match=r"processing\.decimate"):
        identify(cfg, out_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- every schema
def _all_schemas() -> list[type]:
    out = []
    for obj in vars(schema).values():
        if dataclasses.is_dataclass(obj) and obj.__module__ == schema.__name__ and not obj.__name__.startswith("_"):
            out.append(obj)
    return out


def _defaults(cls) -> dict:
    """A valid mapping for ``cls`` (required keys filled with a valid value)."""
    d = {}
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            d[f.name] = {"robot": {"name": "iiwa14", "excitation": "e.yaml", "validation": "v.yaml"},
                         "backend": {"name": "mujoco"}, "estimator": {"name": "wls"}}.get(f.name, "x")
    return d


@pytest.mark.parametrize("cls", _all_schemas(), ids=lambda c: c.__name__)
def test_each_schema_refuses_a_wrong_type_and_an_out_of_range_value(cls):
    from robident_twin.config.check import Errors, build

    errors = Errors()
    assert build(cls, _defaults(cls), "g", errors) is not None and not errors.items
    hints = typing.get_type_hints(cls)
    checked_type = checked_range = False
    for f in dataclasses.fields(cls):
        if f.name == "extra_groups" or (cls is RunConfig and f.name in ("backend", "estimator", "friction")):
            continue
        tp = hints[f.name]
        if tp is typing.Any and not f.metadata.get("per_joint"):
            continue
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        base = args[0] if typing.get_origin(tp) is typing.Union and len(args) == 1 else tp
        for bad in [object(), "not-a-number" if base is not str else 1.5]:
            errors = Errors()
            build(cls, {**_defaults(cls), f.name: bad}, "g", errors)
            assert errors.items and errors.items[0].startswith(f"g.{f.name}"), (f.name, bad, errors.items)
            checked_type = True
        meta = f.metadata
        for bound, delta in (("ge", -1e-9), ("gt", 0.0), ("le", 1e-9), ("lt", 0.0)):
            if bound in meta:
                v = meta[bound] + delta * max(1.0, abs(meta[bound])) if delta else meta[bound]
                if base is int:
                    v = meta[bound] + {"ge": -1, "gt": 0, "le": 1, "lt": 0}[bound]
                if typing.get_origin(base) is tuple:
                    v = [v]
                errors = Errors()
                build(cls, {**_defaults(cls), f.name: v}, "g", errors)
                assert errors.items and errors.items[0].startswith(f"g.{f.name}"), (f.name, v)
                checked_range = True
    has_range = any({"ge", "gt", "le", "lt"} & set(f.metadata) for f in dataclasses.fields(cls))
    assert checked_type and (checked_range or not has_range)


def test_a_group_added_later_is_registered_in_one_call(composer):
    @dataclasses.dataclass(frozen=True)
    class GripperConfig:
        effects: tuple[str, ...] = ()
        backlash_rad: float = schema.key(0.0, ge=0)

    base = to_plain(validate(composer()))
    register_group("gripper", GripperConfig)
    try:
        run = validate({**base, "gripper": {"effects": ["backlash"], "backlash_rad": 1e-3}})
        assert run.group("gripper") == GripperConfig(("backlash",), 1e-3)
        assert to_plain(run)["gripper"] == {"effects": ["backlash"], "backlash_rad": 1e-3}
        with pytest.raises(ConfigError, match=r"gripper\.backlash_rad"):
            validate({**base, "gripper": {"backlash_rad": -1.0}})
        with pytest.raises(ConfigError, match=r"gripper\.efects: unknown key"):
            validate({**base, "gripper": {"efects": []}})
    finally:
        EXTRA_GROUPS.pop("gripper")
    with pytest.raises(ConfigError, match=r"gripper: unknown key"):
        validate({**base, "gripper": {}})


def test_the_schemas_are_in_hydras_config_store():
    from hydra.core.config_store import ConfigStore

    repo = ConfigStore.instance().repo["schema"]
    assert {"backend", "estimator", "friction", "robot", "noise", "montecarlo", "design"} <= set(repo)
    assert {f"{b}.yaml" for b in _groups("backend")} <= set(repo["backend"])
    assert {f"{e}.yaml" for e in ("wls", "ols", "tls", "iv", "ml")} <= set(repo["estimator"])


def test_hydras_copies_of_the_config_store_are_the_store_itself():
    """Hydra deep-copies its config repository, this store included, once per group it lists (217
    times for --help); the copies share the store (robident_twin.config._share_store_on_copy).
    That is safe because the store hands out copies: a changed loaded node leaves it as it was.
    The schemas' nodes are built when first read (robident_twin.config._store), equal to what
    ``ConfigStore.store`` builds at once."""
    import copy

    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    store = ConfigStore.instance()
    assert copy.deepcopy({"store": store})["store"] is store
    # every schema is stored as ConfigStore.store would store it (its DictConfig built on first read)
    def nodes(d):
        for v in d.values():
            yield from nodes(v) if isinstance(v, dict) else [v]
    stored = list(nodes(store.repo["schema"]))
    assert len(stored) >= 30
    for n in stored:
        assert OmegaConf.get_type(n.node) is n._schema and n.node == OmegaConf.structured(n._schema), n.name
        assert n.package is None and n.provider is None and n.group.startswith("schema")
    node = store.load("schema/backend/mujoco.yaml").node
    assert node is not store.load("schema/backend/mujoco.yaml").node
    rate = node.control_rate_hz
    OmegaConf.set_readonly(node, False)  # a frozen dataclass's node: Hydra unlocks it when it merges
    node.control_rate_hz = rate + 1.0
    assert store.load("schema/backend/mujoco.yaml").node.control_rate_hz == rate

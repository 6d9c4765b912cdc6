"""No config dict parsed below the CLI edge (issue 14): the CLI validates the run config once
(``robident_twin.config.validate`` -> RunConfig of frozen dataclasses) and the stages read the
attributes of the typed objects they are handed. Checked on the source: no module of
``robident_twin/`` or ``hal/`` outside the edge subscripts or ``.get()``s a config variable (a name
ending in ``cfg`` or ``config``), and none turns a typed config back into a dict (``to_plain``,
``OmegaConf.to_container``, ``as_dictconfig``)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the edge: the CLI and the config package, and the modules where each layer keeps its own schemas
#: (their as_*() helpers validate a mapping given to the Python API once, at its entry)
EDGE = ("robident_twin/cli.py", "robident_twin/config/", "hal/config.py", "robident_twin/model/config.py",
        "robident_twin/estimation/config.py", "robident_twin/design/config.py", "robident_twin/typed.py")
#: modules not converted yet (issue 14 item 3, stage by stage); each entry goes when its module is
#: converted, and test_not_yet_list_is_current fails on an entry that no longer parses a dict
NOT_YET = {
}
#: calls that turn a config into plain data in order to record it, never to read it back as a config:
#: module -> {the exact expression: why}. Subscripts and .get() stay forbidden in these modules.
RECORDS = {
    "robident_twin/validation/sweeps.py": {
        "to_plain(run)": "config_record: the validated run as a job records and hashes it (summary.json)",
        "OmegaConf.to_container(OmegaConf.load(path), resolve=True)":
            "a finished job's .hydra/config.yaml read as data, only to compare its hash with the result's",
    },
    # the report renders a run's summary.json, whose "config" is the run's record (to_plain at the CLI
    # edge, or read back from the file by task=report, also for runs written by older versions)
    **{"robident_twin/report/html.py": dict.fromkeys(
        ("config['robot']", "config.get('design')", "config['model']", "cfg.get('seed', '-')", "cfg.get('noise')",
         "cfg.get('robot', {})"), "a run's summary.json config record, rendered (_dry_run_of, the overview)")},
    # load_run rebuilds the identified model from a finished run's summary.json (data read from the file)
    "robident_twin/report/identified_twin.py": dict.fromkeys(
        ("s['config']", "cfg.get(key)", "cfg['robot']", "cfg['model']", "cfg['base']", "cfg['base']['n_samples']",
         "cfg['base']['seed']"), "load_run: a finished run's summary.json config record (data read from the file)"),
}
CONFIG_NAME = re.compile(r"(cfg|config)$")
TO_DICT = {"to_plain", "to_container", "as_dictconfig"}


def _name(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def dict_parsing(source: str) -> list[str]:
    """Every place in ``source`` that parses a config as a dict: ``cfg[...]``, ``cfg.get(...)`` on a
    name ending in cfg/config, and a typed config turned back into a dict."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and CONFIG_NAME.search(_name(node.value)):
            out.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and CONFIG_NAME.search(_name(node.func.value)):
            out.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and _name(node.func) in TO_DICT:
            out.append(f"line {node.lineno}: {ast.unparse(node)}")
    return out


def _modules():
    for top in ("robident_twin", "hal"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith(EDGE):
                yield rel, path


def test_the_scan_finds_each_kind_of_dict_parsing():
    src = ("def f(cfg, backend_cfg, run, config):\n"
           "    a = cfg['robot']\n"
           "    b = backend_cfg.get('name', 'mujoco')\n"
           "    c = to_plain(run)\n"
           "    d = OmegaConf.to_container(config)\n"
           "    e = run.robot.name\n"  # typed: fine
           "    g = summary.get('parameters')\n"  # data, not config: fine
           "    return a, b, c, d, e, g\n")
    found = dict_parsing(src)
    assert [f.split(":")[0] for f in found] == ["line 2", "line 3", "line 4", "line 5"], found


def _unrecorded(rel: str, hits: list[str]) -> list[str]:
    """``hits`` without the record-only calls :data:`RECORDS` allows in ``rel``."""
    allowed = RECORDS.get(rel, {})
    return [h for h in hits if h.split(": ", 1)[1] not in allowed]


def test_no_config_dict_parsed_below_the_edge():
    bad = {rel: hits for rel, path in _modules()
           if rel not in NOT_YET and (hits := _unrecorded(rel, dict_parsing(path.read_text())))}
    assert not bad, ("config parsed as a dict below the CLI edge (read the typed object's attributes; "
                     f"robident_twin/config, hal/config.py): {bad}")


def test_not_yet_list_is_current():
    stale = [rel for rel in NOT_YET
             if not (ROOT / rel).exists() or not _unrecorded(rel, dict_parsing((ROOT / rel).read_text()))]
    assert not stale, f"converted: remove {stale} from NOT_YET"


@pytest.mark.parametrize("path", ["robident_twin/pipeline.py", "hal/factory.py", "robident_twin/estimation/postprocess.py",
                                  "robident_twin/model/build.py"])
def test_the_identify_path_is_converted(path):
    """The first stages converted (issue 14 item 3, step 1) stay off the not-yet list."""
    assert path not in NOT_YET and not dict_parsing((ROOT / path).read_text())

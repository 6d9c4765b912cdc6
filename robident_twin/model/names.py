"""Parameter names: the one place a standard parameter's name is made (issue 16).

A standard parameter is a Khalil symbol and the element it belongs to: a link for the ten
inertial symbols ``XX XY XZ YY YZ ZZ MX MY MZ M`` (link j = the link joint j moves, its
merged fixed links included), a joint for the drive, friction, offset and spring symbols
``Ia Fv Fc Fvm Fcm OFF OFFJ KS``. How the element is written depends on the robot:

* numbered (the project's robot files whose joints are numbered ``A1 .. An``, ``J1 .. Jn``,
  ``joint1 .. jointn``, ...): symbol + number, ``XX3``, ``Fv2``; a payload is link n + 1
  (``M8`` on a 7-axis arm). The four built-in robots are numbered.
* named (a robot imported from a URDF or MJCF, or a robot file whose joints have other
  names): symbol + the element's name in brackets, ``XX[panda_link3]``, ``Fv[panda_joint2]``;
  a payload is ``M[payload]``. A robot file has no link names: its link j is named after
  joint j. Characters other than letters, digits and ``_ . - : /`` become ``_`` (so a name is
  safe in CSV headers, JSON and file names); two elements that end up with the same name are
  refused.

A base (regrouped) parameter takes the name of the standard parameter it is kept for, with
``R`` appended when it regroups others (``ZZ1R``, ``ZZ[panda_link1]R``). Code that needs a
parameter's symbol or joint uses :meth:`robident_twin.model.regressor.Regressor.column` and
``Regressor.keys``, never the text of the name.
"""
from __future__ import annotations

import re

from robident_twin.errors import RobotSpecError

LINK_SYMBOLS = ("XX", "XY", "XZ", "YY", "YZ", "ZZ", "MX", "MY", "MZ", "M")
PAYLOAD = "payload"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/-]")
_NUMBERED = re.compile(r"^([A-Za-z_]*?)(\d+)$")


def is_numbered(spec) -> bool:
    """True when the robot's parameters are named by number: a robot file (not imported) whose
    joint names are one prefix followed by 1 .. n in order (A1 .. A7)."""
    if spec.imported is not None:
        return False
    found = [_NUMBERED.match(name) for name in spec.joint_names]
    if not all(found):
        return False
    return (len({m.group(1) for m in found}) == 1
            and [int(m.group(2)) for m in found] == list(range(1, spec.n_joints + 1)))


def _safe(label: str) -> str:
    return _UNSAFE.sub("_", str(label)) or "_"


def element_labels(spec) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(link labels, joint labels) of the parameter names, one per joint; a payload's link label
    is appended to the link labels. Numbered robots: ``1 .. n (+1)``."""
    n = spec.n_joints
    if is_numbered(spec):
        return tuple(str(j) for j in range(1, n + 2)), tuple(str(j) for j in range(1, n + 1))
    joints = tuple(_safe(x) for x in spec.joint_names)
    links = tuple(_safe(x) for x in spec.imported.link_names) if spec.imported is not None else joints
    where = spec.imported.model_path if spec.imported is not None else spec.source
    for kind, labels, raw in (("link", links, spec.imported.link_names if spec.imported else spec.joint_names),
                              ("joint", joints, spec.joint_names)):
        if len(set(labels)) != len(labels):
            dup = sorted({a for a in labels if labels.count(a) > 1})
            raise RobotSpecError(f"{where}: {kind} names {list(raw)} give the same parameter name {dup} (characters "
                                 "other than letters, digits and _ . - : / are written as _); rename one")
    if PAYLOAD in links:
        raise RobotSpecError(f"{where}: a link is named '{PAYLOAD}', the name of the payload's parameters; rename it")
    return links + (PAYLOAD,), joints


def parameter_name(symbol: str, label: str) -> str:
    """The name of parameter ``symbol`` of the element labelled ``label`` (from
    :func:`element_labels`): ``XX3`` for a number, ``XX[panda_link3]`` for a name."""
    return f"{symbol}{label}" if label.isdigit() else f"{symbol}[{label}]"


def base_name(standard_name: str, regroups: bool) -> str:
    """A base parameter's name: its standard parameter's, with ``R`` when it regroups others."""
    return standard_name + ("R" if regroups else "")

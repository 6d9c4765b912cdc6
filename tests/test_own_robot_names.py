"""Parameter names (issue 16): an imported robot's parameters speak in its URDF's link and joint
names, the export back writes each identified value to the element of that name, the drive
goes into the URDF as Drake's transmission tags, and the built-in robots keep their numbered names."""
from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from test_own_robot_export import ROBOTS, identified_like
from test_own_robot_import import erd_robot, random_arm_urdf

from robident_twin.errors import RobotSpecError
from robident_twin.model.base_params import compute_base_parameters
from robident_twin.model.build import build_model
from robident_twin.model.importer import import_robot
from robident_twin.model.overlay import parse_overlay
from robident_twin.model.regressor import ModelOptions, Regressor
from robident_twin.model.robot import load_robot
from robident_twin.report.identified_twin import identified_spec
from robident_twin.report.user_model import export_user_urdf, read_drive_transmissions

KHALIL = ("XX", "XY", "XZ", "YY", "YZ", "ZZ", "MX", "MY", "MZ", "M")
LINK_SYMBOLS = set(KHALIL)
NAME = re.compile(r"^(?P<sym>[A-Za-z]+)\[(?P<el>[^\[\]]+)\](?P<r>R?)$")
DRAKE = "{http://drake.mit.edu}"


def numbered(n: int, *blocks: str, links: int | None = None) -> list[str]:
    out = [f"{k}{j}" for j in range(1, (links or n) + 1) for k in KHALIL]
    for b in blocks:
        out += [f"{b}{j}" for j in range(1, n + 1)]
    return out


def test_the_built_in_robots_keep_their_numbered_names():
    cases = {
        ("iiwa14", "joint_torque", False): numbered(7, "Fv", "Fc"),
        ("lwr4p", "joint_torque", True): numbered(7, "Fv", "Fc", links=8),
        ("cloos_qrc350", "motor_torque", False): numbered(6, "Ia", "Fvm", "Fcm"),
        ("kuka_ir361", "motor_torque", False): numbered(3, "Ia") + ["KS2"] + numbered(3, "Fvm", "Fcm", "OFF")[30:],
    }
    for (robot, meas, payload), expected in cases.items():
        reg = Regressor(load_robot(robot), ModelOptions(measurement=meas, payload=payload))
        assert reg.names == expected, robot
    # the iiwa 14's base parameters, as the default run's summary.json has always named them
    base = build_model(load_robot("iiwa14"), ModelOptions(measurement="joint_torque")).base
    assert " ".join(base.names) == (
        "ZZ1R XX2R XY2 XZ2 YZ2 ZZ2R MX2 MY2R XX3R XY3 XZ3 YZ3R ZZ3R MX3 MY3R XX4R XY4 XZ4 YZ4 ZZ4R MX4 MY4R XX5R "
        "XY5 XZ5 YZ5R ZZ5R MX5 MY5R XX6R XY6 XZ6 YZ6 ZZ6R MX6 MY6R XX7R XY7 XZ7 YZ7 ZZ7 MX7 MY7 Fv1 Fv2 Fv3 Fv4 "
        "Fv5 Fv6 Fv7 Fc1 Fc2 Fc3 Fc4 Fc5 Fc6 Fc7")


def urdf_elements(path) -> tuple[set[str], set[str]]:
    root = ET.parse(path).getroot()
    return {lk.get("name") for lk in root.findall("link")}, {j.get("name") for j in root.findall("joint")}


@pytest.mark.parametrize("robot", ["panda", "ur5"])
def test_imported_names_carry_the_urdfs_link_and_joint_names(robot):
    rel, lock = ROBOTS[robot]
    src = erd_robot(rel)
    spec = import_robot(src, parse_overlay({"lock": lock}))
    links, joints = urdf_elements(src)
    reg = Regressor(spec, ModelOptions(measurement="both"))  # every kind of term: inertial, Ia, Fv, Fc, Fvm, Fcm
    base = compute_base_parameters(reg, n_samples=120)
    for names in (reg.names, base.names):
        assert len(set(names)) == len(names)
        for name in names:
            m = NAME.match(name)
            assert m, f"{name} is not symbol[element]"
            assert m["el"] in (links if m["sym"] in LINK_SYMBOLS else joints), name
    # link i's ten parameters name the link joint i moves, a joint's terms name the joint
    for (sym, j), name in zip(reg.keys, reg.names):
        assert name == f"{sym}[{spec.imported.link_names[j] if sym in LINK_SYMBOLS else spec.joint_names[j]}]"
    used = {NAME.match(nm)["el"] for nm in reg.names}
    assert set(spec.joint_names) <= used and set(spec.imported.link_names) <= used
    print(f"{robot}: {reg.names[0]} ... {reg.names[-1]}; base {base.names[:3]}")


def test_names_are_made_safe_and_unique(tmp_path):
    text = random_arm_urdf(np.random.default_rng(3), 3)
    p = tmp_path / "arm.urdf"
    p.write_text(text.replace('"link2"', '"link 2,x"'))
    reg = Regressor(import_robot(p), ModelOptions(measurement="joint_torque"))
    assert "M[link_2_x]" in reg.names and all("," not in n and " " not in n for n in reg.names)
    p.write_text(text.replace('"link2"', '"link 3"').replace('"link3"', '"link_3"'))
    with pytest.raises(RobotSpecError, match="same parameter name"):
        Regressor(import_robot(p), ModelOptions(measurement="joint_torque"))


@pytest.mark.parametrize("robot", ["panda", "ur5"])
def test_export_back_writes_each_value_to_the_element_of_its_name(robot, tmp_path):
    """From an identified standard vector (regressor order) to the user's URDF copy: re-imported,
    every parameter has the identified value under the same name; friction and drive are on the
    joint the name says (read back from the file by name)."""
    rel, lock = ROBOTS[robot]
    src = erd_robot(rel)
    overlay = parse_overlay({"lock": lock})
    rng = np.random.default_rng(4)
    spec = import_robot(src, overlay)
    spec = dataclasses.replace(spec, _cache={}, joints=tuple(  # gear ratios: the robot's, not identified
        dataclasses.replace(j, gear_ratio=rng.uniform(50, 150)) for j in spec.joints))
    # an identified result: other physically consistent inertials, friction on both sides, drive inertia
    ident = identified_like(spec, np.random.default_rng(3))
    ident = dataclasses.replace(ident, _cache={}, joints=tuple(
        dataclasses.replace(j, fv_motor_Nms_rad=rng.uniform(0.1, 1), fc_motor_Nm=rng.uniform(0.1, 1))
        for j in ident.joints))
    reg = Regressor(ident, ModelOptions(measurement="motor_torque"))
    chi = reg.true_parameters()
    identified = dict(zip(reg.names, chi))
    assert {"Ia", "Fv", "Fc", "Fvm", "Fcm"} <= {s for s, _ in reg.keys}
    out_spec, _ = identified_spec(reg, chi, spec)  # the standard vector written into the robot, by the regressor
    out = export_user_urdf(out_spec, tmp_path / "identified.urdf")

    # inertials: the exported file, imported again, names the same values
    back = Regressor(import_robot(out, overlay), ModelOptions(measurement="joint_torque", viscous=False, coulomb=False))
    inertial = {nm: v for nm, v in zip(back.names, back.true_parameters())}
    assert set(inertial) == {nm for nm in identified if NAME.match(nm)["sym"] in LINK_SYMBOLS}
    for nm, v in inertial.items():
        assert v == pytest.approx(identified[nm], rel=1e-9, abs=1e-12), nm
    # joint terms: <dynamics> and the Drake transmission of the joint of that name
    root = ET.parse(out).getroot()
    joint_el = {j.get("name"): j for j in root.findall("joint")}
    drive = read_drive_transmissions(out)
    for nm, v in identified.items():
        m = NAME.match(nm)
        if m["sym"] in LINK_SYMBOLS:
            continue
        j = m["el"]
        dyn = joint_el[j].find("dynamics")
        total = {"Fv": "Fvm", "Fvm": "Fv", "Fc": "Fcm", "Fcm": "Fc"}
        if m["sym"] in ("Fvm", "Fv"):
            assert float(dyn.get("damping")) == pytest.approx(v + identified.get(f"{total[m['sym']]}[{j}]", 0.0)), nm
        elif m["sym"] in ("Fcm", "Fc"):
            assert float(dyn.get("friction")) == pytest.approx(v + identified.get(f"{total[m['sym']]}[{j}]", 0.0)), nm
        elif m["sym"] == "Ia":
            rotor, ratio = drive[j]
            assert rotor * ratio**2 == pytest.approx(v, rel=1e-12), nm
    print(f"{robot}: {len(identified)} parameters written back by name")


@pytest.mark.parametrize("robot", ["panda", "ur5"])
def test_drive_inertia_round_trips_through_the_urdfs_transmissions(robot, tmp_path):
    """The drive (armature) in Drake's <transmission> convention, read back with a plain XML parser:
    rotor inertia x gear ratio^2 = the identified drive inertia, the gear ratio the robot's; every
    other element of the file is kept, and the tags are the literal drake: ones Drake's parser reads."""
    rel, lock = ROBOTS[robot]
    src = erd_robot(rel)
    spec = import_robot(src, parse_overlay({"lock": lock}))
    ident = identified_like(spec, np.random.default_rng(9))
    out = export_user_urdf(ident, tmp_path / "identified.urdf")
    text = out.read_text()
    assert 'xmlns:drake="http://drake.mit.edu"' in text and "<drake:rotor_inertia " in text
    root = ET.parse(out).getroot()
    back = {}
    for tr in root.findall("transmission"):
        (jt,) = tr.findall("joint")
        act = tr.find("actuator")
        back[jt.get("name")] = (float(act.find(DRAKE + "rotor_inertia").get("value")),
                                float(act.find(DRAKE + "gear_ratio").get("value")))
    assert set(back) == set(spec.joint_names)
    for j in ident.joints:
        rotor, ratio = back[j.name]
        assert ratio == j.gear_ratio
        assert rotor * ratio**2 == pytest.approx(j.drive_inertia_kgm2, rel=1e-14)
    # everything but inertials, joint dynamics and the drive tags is the user's file
    from test_own_robot_export import without

    assert without(root, ET.parse(src).getroot()) == without(ET.parse(src).getroot())


def test_the_generated_urdf_carries_the_drive_of_each_joint():
    """The project's URDF (twins, identified_<robot>.urdf) has the drive in the same tags; a coupled
    robot (CLOOS differential wrist) gets none."""
    from robident_twin.model.builders import to_urdf

    spec = load_robot("iiwa14")
    root = ET.fromstring(to_urdf(spec))
    back = {tr.find("joint").get("name"): tr.find("actuator") for tr in root.findall("transmission")}
    assert list(back) == spec.joint_names
    for j in spec.joints:
        rotor = float(back[j.name].find(DRAKE + "rotor_inertia").get("value"))
        ratio = float(back[j.name].find(DRAKE + "gear_ratio").get("value"))
        assert ratio == j.gear_ratio and rotor * ratio**2 == pytest.approx(j.drive_inertia_kgm2, rel=1e-14)
    assert ET.fromstring(to_urdf(load_robot("cloos_qrc350"))).findall("transmission") == []

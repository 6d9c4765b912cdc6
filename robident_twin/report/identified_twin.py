"""The identified twin: identified base parameters -> physically consistent standard
parameters -> a robot file in the project's own format -> URDF and MJCF.

Flow (``robident-twin task=export``):

1. base parameters ``beta`` with their covariance, from a fresh identification
   (:func:`robident_twin.pipeline.identify`) or from a finished run's ``summary.json``
   (then only the standard deviations are stored: the covariance is taken diagonal);
2. :func:`robident_twin.estimation.physical.sdp_consistent`: standard parameters ``chi`` with a
   positive-definite pseudo-inertia per link, non-negative drive inertia and friction,
   ``K chi`` close to ``beta`` in the covariance-weighted norm, and a small pull toward
   the nominal CAD model (:func:`cad_nominal`) that fixes the directions the data cannot
   see (e.g. the mass of link 1);
3. :func:`identified_spec`: the source robot with the identified link inertials (mass,
   COM, inertia about the COM), drive inertia, friction, motor offsets, spring forces
   and payload; kinematics, limits, gear ratios and sensor data stay the robot file's.
   What the identification model does not contain (the drive inertia of a joint-torque
   model) is carried over from the robot file and listed in ``carried_over``;
4. :func:`export_twin`: ``identified_<robot>.yaml`` (loadable with
   :func:`robident_twin.model.robot.load_robot`, so the identified twin can be simulated by the
   project), ``.urdf`` and ``.xml`` (MJCF) generated from it by
   :mod:`robident_twin.model.builders`, and the per-link diff against the nominal model; the
   URDF carries the drive (rotor inertia, gear ratio) in Drake's ``<transmission>`` tags
   (:func:`robident_twin.model.builders.to_urdf`), the MJCF as ``armature``;
5. :func:`check_exports`: the exported files loaded in pinocchio, MuJoCo and PyBullet
   reproduce the identified model's torques ``W(q, dq, ddq) chi`` (rigid body from the
   engine, drive inertia and friction added as the project's twins do).

What "nominal" means here: the robot files ARE the twins' ground truth, so the nominal
(CAD) model is derived from them as a CAD model differs from a real robot
(:func:`cad_nominal`): per link the mass off by up to +-10 %, the COM by up to +-1 cm, the
principal central moments by up to +-20 % (seeded, reproducible), rounded to CAD
precision, and no drive inertia and no friction (a CAD model has neither).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from robident_twin.atomic import write_text_atomic
from robident_twin.errors import ConfigError, IdentificationError
from robident_twin.model.nominal import cad_nominal  # noqa: F401  (used as it.cad_nominal by tests and experiments)
from robident_twin.model.robot import FrictionVariant, LinkInertial, RobotSpec

# --------------------------------------------------------------------------- robot file writer


def _fl(x) -> float:
    return float(x)


def _inertia_dict(I: np.ndarray) -> dict:
    return {"xx": _fl(I[0, 0]), "yy": _fl(I[1, 1]), "zz": _fl(I[2, 2]),
            "xy": _fl(I[0, 1]), "xz": _fl(I[0, 2]), "yz": _fl(I[1, 2])}


def _link_dict(link: LinkInertial) -> dict:
    return {"mass_kg": _fl(link.mass_kg), "com_m": [_fl(x) for x in link.com_m],
            "inertia_com_kgm2": _inertia_dict(link.inertia_com_kgm2)}


def _friction_side(fv: float, fc: float, var: FrictionVariant, offset: float | None = None) -> dict:
    d = {"viscous_Nms_rad": _fl(fv), "coulomb_Nm": _fl(fc)}
    if offset is not None:
        d["offset_Nm"] = _fl(offset)
    if var.kind != "viscous_coulomb":
        d["kind"] = var.kind
        if var.kind == "stribeck":
            d["stribeck_Nm"] = _fl(var.stribeck_Nm)
            d["stribeck_velocity_rad_s"] = _fl(var.stribeck_velocity_rad_s)
        else:
            d["coulomb_negative_Nm"] = _fl(var.coulomb_negative_Nm)
    return d


def robot_to_dict(spec: RobotSpec) -> dict:
    """The robot file mapping (``sim_assets/<robot>/robot.yaml`` format) of a RobotSpec:
    :func:`robident_twin.model.robot.parse_robot` of it gives the same robot back."""
    joints = []
    for j in spec.joints:
        jd: dict[str, Any] = {
            "name": j.name,
            "origin": {"xyz_m": [_fl(x) for x in j.origin_xyz_m], "rpy_rad": [_fl(x) for x in j.origin_rpy_rad]},
            "limits": {"position_deg": [math.degrees(j.q_min_rad), math.degrees(j.q_max_rad)],
                       "velocity_deg_s": math.degrees(j.dq_max_rad_s),
                       "acceleration_rad_s2": _fl(j.ddq_max_rad_s2), "torque_Nm": _fl(j.tau_max_Nm)},
            "link": _link_dict(j.link),
            "drive": {"inertia_kgm2": _fl(j.drive_inertia_kgm2), "gear_ratio": _fl(j.gear_ratio)},
            "friction": {"link": _friction_side(j.fv_link_Nms_rad, j.fc_link_Nm, j.friction_link_variant),
                         "motor": _friction_side(j.fv_motor_Nms_rad, j.fc_motor_Nm, j.friction_motor_variant,
                                                 j.offset_motor_Nm)},
            "sensors": {"q_std_rad": _fl(j.q_std_rad), "encoder_resolution_rad": _fl(j.encoder_resolution_rad),
                        "tau_joint_std_Nm": _fl(j.tau_joint_std_Nm), "tau_motor_std_Nm": _fl(j.tau_motor_std_Nm)},
        }
        if j.spring is not None:
            jd["spring"] = {"force_N": _fl(j.spring.force_N), "lever_l_m": _fl(j.spring.lever_l_m),
                            "lever_r_m": _fl(j.spring.lever_r_m), "q0_deg": math.degrees(j.spring.q0_rad)}
        joints.append(jd)
    out: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "gravity_m_s2": [_fl(x) for x in spec.gravity_m_s2],
        "coulomb_smoothing_rad_s": _fl(spec.coulomb_smoothing_rad_s),
        "flange": {"xyz_m": [_fl(x) for x in spec.flange_xyz_m], "rpy_rad": [_fl(x) for x in spec.flange_rpy_rad]},
        "home_deg": [math.degrees(x) for x in spec.home_rad],
        "has_joint_torque_sensors": bool(spec.has_joint_torque_sensors),
        "joints": joints,
    }
    if spec.coupling_matrix is not None:
        out["coupling_matrix"] = [[_fl(x) for x in row] for row in spec.coupling_matrix]
    if spec.payload is not None:
        out["payload"] = _link_dict(spec.payload)
        out["payload_attached"] = bool(spec.payload_attached)
    return out


def _atomic_write(path: Path, text: str) -> None:
    write_text_atomic(path, text)


def write_robot_yaml(spec: RobotSpec, path: Path, header: str = "") -> Path:
    """Write a robot file (atomically), with ``header`` as leading comment lines."""
    body = yaml.safe_dump(robot_to_dict(spec), sort_keys=False, default_flow_style=None, width=120)
    head = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    _atomic_write(Path(path), head + body)
    return Path(path)


# --------------------------------------------------------------------------- identified spec


def _values(regressor, chi: np.ndarray, symbol: str) -> np.ndarray | None:
    """Per joint, the value of parameter ``symbol`` (NaN where the joint has none); None if no joint has it."""
    return regressor.per_joint(chi, symbol, missing=np.nan)


def _link_from_khalil(block: np.ndarray, what: str) -> LinkInertial:
    from robident_twin.estimation.physical import link_physical

    ph = link_physical(block)
    if not ph["mass_kg"] > 0:
        raise IdentificationError(f"{what}: mass {ph['mass_kg']:.4g} kg is not positive")
    I = ph["inertia_com_kgm2"]
    return LinkInertial(ph["mass_kg"], np.asarray(ph["com_m"], float), 0.5 * (I + I.T))


def identified_spec(regressor, chi: np.ndarray, source: RobotSpec, name: str | None = None) -> tuple[RobotSpec, dict]:
    """The source robot with the parameters of the standard vector ``chi`` (regressor
    order). Returns the spec and ``carried_over``: per quantity, why it was kept from the
    source (the identification model does not contain it)."""
    names, n = list(regressor.names), source.n_joints
    chi = np.asarray(chi, dtype=float)
    if chi.shape != (len(names),):
        raise ConfigError(f"identified twin: chi has shape {chi.shape}, expected ({len(names)},)")
    opts = regressor.options
    carried: dict[str, str] = {}
    if not opts.uses_links:
        raise ConfigError("identified twin: model.measurement=difference identifies the drives only; "
                          "use joint_torque, motor_torque or both")
    from robident_twin.estimation.physical import link_blocks, n_bodies

    blocks = link_blocks(chi, n_bodies(regressor))
    payload, attached = source.payload, source.payload_attached
    if opts.payload:
        payload = _link_from_khalil(blocks[n], "payload")
    elif source.payload_attached:
        # the identified last link carries the payload: the exported robot has none mounted
        attached = False
        carried["payload"] = "identified together with the last link (model.payload=false): not mounted separately"
    ia = _values(regressor, chi, "Ia")
    fv, fc = _values(regressor, chi, "Fv"), _values(regressor, chi, "Fc")
    fvm, fcm = _values(regressor, chi, "Fvm"), _values(regressor, chi, "Fcm")
    off, ks = _values(regressor, chi, "OFF"), _values(regressor, chi, "KS")
    for key, arr, what in (("drive.inertia_kgm2", ia, "drive inertia"), ("friction.link", fv, "link friction"),
                           ("friction.motor", fvm, "motor-side friction"),
                           ("friction.motor.offset_Nm", off, "motor offsets")):
        if arr is None:
            carried[key] = f"{what}: not in the {opts.measurement} model, kept from {source.source}"
    joints = []
    for i, j in enumerate(source.joints):
        upd: dict[str, Any] = {"link": _link_from_khalil(blocks[i], f"link {i + 1}"),
                               "friction_link_variant": FrictionVariant(),
                               "friction_motor_variant": FrictionVariant()}
        nonneg = lambda v: max(float(v), 0.0)  # noqa: E731  (the SDP's >= 0 up to solver round-off)
        if ia is not None:
            upd["drive_inertia_kgm2"] = nonneg(ia[i])
        if fv is not None:
            upd["fv_link_Nms_rad"] = nonneg(fv[i])
        if fc is not None:
            upd["fc_link_Nm"] = nonneg(fc[i])
        if fvm is not None:
            upd["fv_motor_Nms_rad"] = nonneg(fvm[i])
        if fcm is not None:
            upd["fc_motor_Nm"] = nonneg(fcm[i])
        if off is not None:
            upd["offset_motor_Nm"] = float(off[i])
        if ks is not None and j.spring is not None and np.isfinite(ks[i]):
            upd["spring"] = dataclasses.replace(j.spring, force_N=nonneg(ks[i]))
        joints.append(dataclasses.replace(j, **upd))
    spec = dataclasses.replace(source, name=name or f"identified_{source.name}",
                               description=f"identified twin of {source.name} ({opts.measurement} model)",
                               joints=tuple(joints), payload=payload, payload_attached=attached, _cache={})
    return spec, carried


# --------------------------------------------------------------------------- the identified twin


@dataclass
class IdentifiedTwin:
    """Everything the export writes: the identification model, the base estimate, the
    consistent standard vector and the robots built from it."""

    model: Any  # pipeline.IdentificationModel
    beta: np.ndarray
    cov: np.ndarray | None
    chi: np.ndarray  # physically consistent standard parameters (regressor order)
    spec: RobotSpec  # the identified twin
    nominal: RobotSpec  # the CAD-like nominal model
    truth: RobotSpec | None  # the robot file (ground truth on a twin), None for real data
    carried_over: dict = field(default_factory=dict)
    physical: Any = None  # physical.PhysicalResult

    @property
    def regressor(self):
        return self.model.regressor


def build_identified_twin(model, beta: np.ndarray, cov: np.ndarray | None, nominal: RobotSpec,
                          truth: RobotSpec | None = None, reg_weight: float = 1e-3) -> IdentifiedTwin:
    """Consistent standard parameters for an identified base estimate (SDP, prior = the
    nominal model's standard vector) and the identified robot built from them."""
    from robident_twin.estimation.physical import check_consistency, sdp_consistent
    from robident_twin.model.regressor import Regressor

    reg, base = model.regressor, model.base
    beta = np.asarray(beta, dtype=float)
    if beta.shape != (base.n_base,):
        raise ConfigError(f"identified twin: {beta.size} base parameters given, the model has {base.n_base}")
    nom_reg = Regressor(nominal, reg.options)  # its friction columns may differ (no friction in a CAD model)
    nom_values = dict(zip(nom_reg.names, nom_reg.true_parameters()))
    prior = np.array([nom_values.get(name, 0.0) for name in reg.names])
    res = sdp_consistent(reg, base, beta, cov=cov, prior=prior, reg_weight=reg_weight)
    rep = check_consistency(reg, res.chi)
    if not rep.ok:
        raise IdentificationError(f"identified twin: the SDP result is not physically consistent ({rep})")
    spec, carried = identified_spec(reg, res.chi, model.spec)
    return IdentifiedTwin(model, beta, cov, res.chi, spec, nominal, truth, carried, res)


def load_run(run_dir: str | os.PathLike):
    """(model, beta, cov, config) of a finished identify run's ``summary.json``; the
    covariance is diagonal (the summary stores standard deviations only)."""
    from robident_twin.model.build import build_model, model_options, resolve_robot

    d = Path(run_dir)
    if not d.is_dir():
        raise ConfigError(f"export.run_dir: {d} is not a directory (expected a finished identify run)")
    path = d / "summary.json"
    if not path.is_file():
        failed = d / "FAILED.txt"
        extra = f"; the run failed: {failed.read_text().strip()[:300]}" if failed.is_file() else ""
        raise ConfigError(f"export.run_dir: {path} does not exist (expected the summary.json of a finished "
                          f"identify run){extra}")
    try:
        s = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    for key in ("config", "parameters", "measurement"):
        if key not in s:
            raise ConfigError(f"{path}: field '{key}' missing (written by `robident-twin task=identify`)")
    cfg = s["config"]
    for key in ("robot", "model", "base"):
        if not isinstance(cfg.get(key), dict):
            raise ConfigError(f"{path}: field 'config.{key}' missing or not a mapping")
    spec = resolve_robot(cfg["robot"])
    options = model_options(cfg["model"], cfg["robot"])
    model = build_model(spec, options, int(cfg["base"]["n_samples"]), int(cfg["base"]["seed"]))
    names = [p.get("name") for p in s["parameters"]]
    if names != list(model.base.names):
        raise ConfigError(f"{path}: field 'parameters': the base parameters {names[:4]}... do not match the model "
                          f"rebuilt from its config ({list(model.base.names)[:4]}..., {model.base.n_base} parameters)")
    beta, std = [], []
    for i, p in enumerate(s["parameters"]):
        for key, out in (("estimate", beta), ("std", std)):
            v = p.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ConfigError(f"{path}: field 'parameters[{i}].{key}' ({p.get('name')}): expected a finite "
                                  f"number, got {v!r}")
            out.append(float(v))
    std = np.maximum(np.array(std), 1e-12 * np.maximum(np.abs(beta), 1.0))
    return model, np.array(beta), np.diag(std**2), cfg


# --------------------------------------------------------------------------- per-link diff


def _link_of(spec: RobotSpec, i: int) -> LinkInertial:
    """Link i's inertial, with a mounted payload added to the last link (as the
    identification without model.payload sees it)."""
    link = spec.joints[i].link
    if i == spec.n_joints - 1 and spec.payload_attached:
        from robident_twin.estimation.physical import link_physical
        from robident_twin.model.regressor import khalil_vector, payload_transform

        k = khalil_vector(link) + payload_transform(spec) @ khalil_vector(spec.payload)
        ph = link_physical(k)
        return LinkInertial(ph["mass_kg"], ph["com_m"], ph["inertia_com_kgm2"])
    return link


def link_diff(nominal: RobotSpec, identified: RobotSpec, truth: RobotSpec | None = None) -> list[dict]:
    """Per link: mass (kg), COM (m) and inertia about the COM (kg m^2, xx yy zz xy xz yz)
    of the nominal, identified and (on a twin) true robot, and identified - nominal."""
    keys = ("xx", "yy", "zz", "xy", "xz", "yz")
    rows = []
    for i, j in enumerate(identified.joints):
        entry: dict[str, Any] = {"link": i + 1, "joint": j.name}
        models = {"nominal": _link_of(nominal, i), "identified": _link_of(identified, i)}
        if truth is not None:
            models["true"] = _link_of(truth, i)
        for label, L in models.items():
            entry[label] = {"mass_kg": float(L.mass_kg), "com_m": [float(x) for x in L.com_m],
                            "inertia_com_kgm2": dict(zip(keys, (float(v) for v in _inertia_dict(L.inertia_com_kgm2).values())))}
        a, b = models["identified"], models["nominal"]
        entry["identified_minus_nominal"] = {
            "mass_kg": float(a.mass_kg - b.mass_kg), "com_m": [float(x) for x in a.com_m - b.com_m],
            "inertia_com_kgm2": {k: entry["identified"]["inertia_com_kgm2"][k] - entry["nominal"]["inertia_com_kgm2"][k]
                                 for k in keys}}
        rows.append(entry)
    return rows


def format_link_diff(rows: list[dict]) -> str:
    """The per-link diff as a text table (mass kg, COM mm, inertia about the COM in
    1e-3 kg m^2)."""
    has_true = "true" in rows[0]
    labels = ["nominal", "identified"] + (["true"] if has_true else [])
    head = (f"{'link':<5}{'model':<11}{'mass kg':>9}{'cx mm':>8}{'cy mm':>8}{'cz mm':>8}"
            + "".join(f"{'I' + k:>8}" for k in ("xx", "yy", "zz", "xy", "xz", "yz")) + "   (I in 1e-3 kg m^2)")
    lines = [head, "-" * len(head)]
    for r in rows:
        for lab in labels + ["identified_minus_nominal"]:
            d = r[lab]
            name = "id - nom" if lab == "identified_minus_nominal" else lab
            lines.append(f"{r['link'] if lab == 'nominal' else '':<5}{name:<11}{d['mass_kg']:>9.3f}"
                         + "".join(f"{1e3 * c:>8.1f}" for c in d["com_m"])
                         + "".join(f"{1e3 * v:>8.2f}" for v in d["inertia_com_kgm2"].values()))
    return "\n".join(lines)


# --------------------------------------------------------------------------- export


def export_paths(out_dir: Path, robot_name: str) -> dict[str, Path]:
    out = Path(out_dir)
    stem = f"identified_{robot_name}"
    return {"yaml": out / f"{stem}.yaml", "urdf": out / f"{stem}.urdf", "mjcf": out / f"{stem}.xml",
            "diff_json": out / f"{stem}_diff.json", "diff_txt": out / f"{stem}_diff.txt"}


def export_twin(twin: IdentifiedTwin, out_dir: Path) -> dict[str, Path]:
    """Write the identified robot file, its URDF and MJCF (generated from the file as
    loaded back, so the three agree) and the per-link diff; returns the paths."""
    from robident_twin.model.builders import to_mjcf, to_urdf
    from robident_twin.model.robot import load_robot

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src = twin.model.spec
    paths = export_paths(out, src.name)
    header = (f"Identified twin of {src.name} (robident-twin task=export), generated from {src.source}.\n"
              f"Link inertials{', drive inertia' if 'drive.inertia_kgm2' not in twin.carried_over else ''} and "
              f"friction: physically consistent standard parameters (SDP, physical.sdp_consistent) of the\n"
              f"identified {twin.regressor.options.measurement} base parameters. Kinematics, limits, gear ratios "
              f"and sensors: from the source.\n"
              + "".join(f"Carried over: {k}: {v}\n" for k, v in twin.carried_over.items()))
    write_robot_yaml(twin.spec, paths["yaml"], header)
    spec = load_robot(paths["yaml"])  # what a user of the file gets
    _atomic_write(paths["urdf"], to_urdf(spec))  # the drive in Drake's <transmission> tags (URDF has no armature)
    _atomic_write(paths["mjcf"], to_mjcf(spec))
    if twin.spec.imported is not None:  # a user's robot: the identified values in a copy of their own files
        from robident_twin.report.user_model import export_user_mjcf, export_user_urdf

        stem = f"identified_{src.name}_{Path(twin.spec.imported.model_path).stem}"
        urdf_copy = None
        if twin.spec.imported.kind == "urdf":
            urdf_copy = paths["user_urdf"] = export_user_urdf(twin.spec, out / f"{stem}.urdf")
        paths["user_mjcf"] = export_user_mjcf(twin.spec, out / f"{stem}_mjcf.xml", urdf_copy)
    rows = link_diff(twin.nominal, spec, twin.truth)
    from robident_twin.report.tables import write_json

    write_json({"robot": src.name, "measurement": twin.regressor.options.measurement,
                "nominal": "CAD-like nominal (robident_twin.model.nominal.cad_nominal)",
                "carried_over": twin.carried_over, "links": rows}, paths["diff_json"])
    _atomic_write(paths["diff_txt"], format_link_diff(rows) + "\n")
    return paths


# --------------------------------------------------------------------------- engine check


def _channels(spec: RobotSpec, measurement: str, joint: np.ndarray, rigid_plus_drive_motor: np.ndarray) -> np.ndarray:
    if measurement == "joint_torque":
        return joint
    if measurement == "motor_torque":
        return rigid_plus_drive_motor
    if measurement == "both":
        return np.hstack([joint, rigid_plus_drive_motor])
    raise ConfigError(f"engine check: measurement {measurement} is not supported")


def _joint_and_motor(spec: RobotSpec, rigid: np.ndarray, ia_motor: np.ndarray, q, dq, ddq):
    """Joint- and motor-side torques from an engine's rigid-body torques, the drive
    inertia the engine file carries (motor coordinates) and the robot file's friction,
    springs and offsets, as the twins apply them (robident_twin.model.dynamics)."""
    from robident_twin.model.dynamics import (
        joint_torque_to_motor,
        link_friction_Nm,
        motor_side_friction_Nm,
        spring_torque_Nm,
        to_motor,
    )

    joint = rigid + link_friction_Nm(spec, dq)
    if spec.spring_joints:
        joint = joint - spring_torque_Nm(spec, q)
    motor = joint_torque_to_motor(spec, joint) + ia_motor * to_motor(spec, ddq) + motor_side_friction_Nm(
        spec, to_motor(spec, dq))
    return joint, motor


def pinocchio_torques(yaml_path: Path, urdf_path: Path, q, dq, ddq) -> tuple[np.ndarray, np.ndarray]:
    """(joint, motor) torques: pinocchio RNEA of the exported URDF file + the robot file's
    drive inertia and friction."""
    import pinocchio as pin

    from robident_twin.model.robot import load_robot

    spec = load_robot(yaml_path)
    model = pin.buildModelFromUrdf(str(urdf_path))
    model.gravity.linear = np.asarray(spec.gravity_m_s2, float)
    data = model.createData()
    rigid = np.array([pin.rnea(model, data, q[k], dq[k], ddq[k]) for k in range(q.shape[0])])
    return _joint_and_motor(spec, rigid, spec.drive_inertia_kgm2, q, dq, ddq)


def _tendon_jacobian(m, d) -> np.ndarray:
    """Dense ntendon x nv tendon Jacobian (MuJoCo may store it sparse)."""
    import mujoco

    if d.ten_J.size == m.ntendon * m.nv:
        return d.ten_J.reshape(m.ntendon, m.nv).copy()
    J = np.zeros((m.ntendon, m.nv))
    mujoco.mju_sparse2dense(J, d.ten_J, m.ten_J_rownnz, m.ten_J_rowadr, m.ten_J_colind)
    return J


def mujoco_torques(yaml_path: Path, mjcf_path: Path, q, dq, ddq) -> tuple[np.ndarray, np.ndarray]:
    """(joint, motor) torques: ``mj_inverse`` of the exported MJCF file (armature = drive
    inertia, read back from the MuJoCo model) + the robot file's friction. The rigid-body
    part is qfrc_inverse minus the armature's share."""
    import mujoco

    from robident_twin.model.robot import load_robot

    spec = load_robot(yaml_path)
    m = mujoco.MjModel.from_xml_path(str(mjcf_path))
    d = mujoco.MjData(m)
    N, n = q.shape
    rigid = np.empty((N, n))
    previous = mujoco.get_mjcb_passive()
    mujoco.set_mjcb_passive(None)  # no twin's friction callback: the engine's rigid body alone
    try:
        for k in range(N):
            d.qpos[:], d.qvel[:], d.qacc[:] = q[k], dq[k], ddq[k]
            mujoco.mj_inverse(m, d)
            arm = m.dof_armature * ddq[k]
            if m.ntendon:
                J = _tendon_jacobian(m, d)
                arm = arm + J.T @ (m.tendon_armature * (J @ ddq[k]))
            rigid[k] = d.qfrc_inverse - arm
    finally:
        mujoco.set_mjcb_passive(previous)
    ia = m.tendon_armature.copy() if m.ntendon else m.dof_armature.copy()
    return _joint_and_motor(spec, rigid, ia, q, dq, ddq)


def pybullet_torques(yaml_path: Path, urdf_path: Path, q, dq, ddq) -> tuple[np.ndarray, np.ndarray]:
    """(joint, motor) torques: PyBullet's ``calculateInverseDynamics`` of the exported URDF
    file (fixed base, inertia from the file; the flange's explicit zero inertial keeps it massless) + the robot
    file's drive inertia (PyBullet has no armature) and friction."""
    import pybullet as pb

    from hal.sim.pybullet_backend import _quiet_c_output
    from robident_twin.model.robot import load_robot

    spec = load_robot(yaml_path)
    c = pb.connect(pb.DIRECT)
    try:
        with _quiet_c_output():
            body = pb.loadURDF(str(urdf_path), useFixedBase=True, flags=pb.URDF_USE_INERTIA_FROM_FILE,
                               physicsClientId=c)
        ids, by_name = [], {}
        for i in range(pb.getNumJoints(body, physicsClientId=c)):  # plain load: the flange's zero inertial is in the file
            info = pb.getJointInfo(body, i, physicsClientId=c)
            by_name[info[1].decode()] = (i, info[2])
        for name in spec.joint_names:
            if name not in by_name or by_name[name][1] != pb.JOINT_REVOLUTE:
                raise ConfigError(f"{urdf_path}: no revolute joint '{name}' in PyBullet's model")
            ids.append(by_name[name][0])
        if ids != list(range(len(ids))):
            raise ConfigError(f"{urdf_path}: PyBullet orders the joints {ids}, expected the revolute joints first")
        pb.setGravity(*(float(g) for g in spec.gravity_m_s2), physicsClientId=c)
        rigid = np.array([pb.calculateInverseDynamics(body, q[k].tolist(), dq[k].tolist(), ddq[k].tolist(),
                                                      physicsClientId=c) for k in range(q.shape[0])])
    finally:
        pb.disconnect(c)
    return _joint_and_motor(spec, rigid, spec.drive_inertia_kgm2, q, dq, ddq)


def check_exports(twin: IdentifiedTwin, paths: Mapping[str, Path], q_rad: np.ndarray, dq_rad_s: np.ndarray,
                  ddq_rad_s2: np.ndarray, engines=("pinocchio", "mujoco", "pybullet")) -> dict:
    """Load the exported files in each engine and compare its torques (the identified
    model's channels) with ``W(q, dq, ddq) chi``. Per engine: the largest per-joint
    relative error max_k |tau_engine - W chi| / max_k |W chi| and the largest absolute
    error (N m)."""
    reg = twin.regressor
    meas = reg.options.measurement
    q, dq, ddq = (np.atleast_2d(np.asarray(x, float)) for x in (q_rad, dq_rad_s, ddq_rad_s2))
    ref = (reg.stack(q, dq, ddq) @ twin.chi).reshape(q.shape[0], -1)
    offj = _values(reg, twin.chi, "OFFJ")  # sensor offsets: not in a robot file
    fns = {"pinocchio": lambda: pinocchio_torques(paths["yaml"], paths["urdf"], q, dq, ddq),
           "mujoco": lambda: mujoco_torques(paths["yaml"], paths["mjcf"], q, dq, ddq),
           "pybullet": lambda: pybullet_torques(paths["yaml"], paths["urdf"], q, dq, ddq)}
    out = {}
    for eng in engines:
        if eng not in fns:
            raise ConfigError(f"export.engines: unknown engine '{eng}'; expected {sorted(fns)}")
        joint, motor = fns[eng]()
        if offj is not None:
            joint = joint + offj
        tau = _channels(twin.spec, meas, joint, motor)
        err = np.abs(tau - ref)
        scale = np.maximum(np.max(np.abs(ref), axis=0), 1e-12)
        out[eng] = {"max_rel_error": float(np.max(np.max(err, axis=0) / scale)),
                    "max_abs_error_Nm": float(err.max()), "n_samples": int(q.shape[0])}
    return out


def validation_states(spec: RobotSpec, design: str | os.PathLike, n_samples: int = 400):
    """(q, dq, ddq) at ``n_samples`` instants of one period of a stored design."""
    from robident_twin.design.stored import resolve_design

    traj = resolve_design(design, spec)
    return traj.evaluate(np.arange(n_samples) * traj.period_s / n_samples)

"""Model-based feed-forward control on the twin (ICMA 2020 Sec. IV-C, Fig. 3, Table VII).

The twin's joint controller (PD, or the CLOOS's P position / PI velocity cascade) adds a torque
feed-forward computed from the desired trajectory by a chosen model:

- ``none``: no feed-forward (the feedback alone),
- ``nominal``: the CAD-like nominal model (``model.nominal.cad_nominal``: no friction, no drive),
- ``identified``: an identified model, either its base-parameter prediction (``regressor_feedforward``)
  or an exported identified robot file (``spec_feedforward``).

Each is played on a fresh twin along the same reference; the reference error ``q_ref - q`` (the
true joint position, without the encoder noise) gives the per-joint RMS and its ratio to ``none``,
the figure of the paper's Table VII.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from robident_twin.errors import ConfigError

#: motor torques (N, n) of a reference (q, dq, ddq), each (N, n) in joint coordinates
FeedForward = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]

FEEDFORWARD_CHOICES = ("none", "nominal", "identified")

#: the robot's control structure: the zero of the PI velocity loop (Hz) for the robots whose
#: controller has one (the CLOOS QRC 350, ICMA 2020 Fig. 3); the KUKA arms keep the PD loop
PI_VELOCITY_LOOP_HZ: dict[str, float] = {"cloos_qrc350": 1.0}


def integral_hz_for(robot_name: str, override: float | None = None) -> float:
    """The velocity-loop integral zero of a robot's controller (``override`` when given)."""
    if override is not None:
        if isinstance(override, bool) or not isinstance(override, (int, float)) or override < 0:
            raise ConfigError(f"control.integral_hz: expected null or a frequency >= 0 (Hz), got {override!r}")
        return float(override)
    return PI_VELOCITY_LOOP_HZ.get(robot_name.removesuffix("_cad"), 0.0)


def spec_feedforward(spec) -> FeedForward:
    """The inverse dynamics of a robot file (nominal, or an exported identified twin) in motor torques."""
    from robident_twin.model.dynamics import TruthModel

    model = TruthModel(spec)

    def ff(q, dq, ddq):
        return model.torques(q, dq, ddq)[1]

    return ff


def regressor_feedforward(model, beta: np.ndarray) -> FeedForward:
    """The identified base-parameter model ``W(q, dq, ddq) beta`` in motor torques: the motor channels
    for ``motor_torque`` or ``both``, the joint torques through the gearbox for ``joint_torque``
    (a joint-torque model has no drive inertia nor motor-side friction: it cannot predict them)."""
    from robident_twin.model.dynamics import joint_torque_to_motor

    beta = np.asarray(beta, dtype=float)
    if beta.shape != (model.base.n_base,):
        raise ConfigError(f"identified feed-forward: {beta.size} base parameters given, the model has "
                          f"{model.base.n_base}")
    measurement = model.regressor.options.measurement
    if measurement not in ("motor_torque", "joint_torque", "both"):
        raise ConfigError(f"identified feed-forward: model.measurement '{measurement}' predicts no motor torque "
                          f"(expected motor_torque, joint_torque or both)")
    spec, n = model.spec, model.spec.n_joints

    def ff(q, dq, ddq):
        W = model.base.columns(model.regressor.stack(q, dq, ddq))
        tau = (W @ beta).reshape(np.shape(q)[0], -1)
        if measurement == "both":
            return tau[:, n:]
        return tau if measurement == "motor_torque" else joint_torque_to_motor(spec, tau)

    return ff


@dataclass(frozen=True)
class Tracking:
    """The reference error of one feed-forward choice along the recorded window."""

    name: str
    rms_rad: np.ndarray
    max_abs_rad: np.ndarray

    @property
    def rms_deg(self) -> np.ndarray:
        return np.degrees(self.rms_rad)


def tracking_error(name: str, recording, coupling: np.ndarray | None = None) -> Tracking:
    """RMS and peak of the reference error per joint of a twin recording: ``q_ref - C q_motor``, the
    true motor positions in joint coordinates (what the drive's encoder measures and the real
    CLOOS's ``deg_e`` is; with elastic joints the gear's deflection, which no feed-forward
    corrects, is not in it) when the recording has them and ``coupling`` C is given, else
    ``q_ref - q_true`` (rigid joints: the same)."""
    q_true = recording.metadata.get("true_q_rad")
    q_motor = recording.metadata.get("true_q_motor_rad")
    if q_true is None:
        raise ConfigError(f"control: the recording of '{name}' has no true joint positions (a twin records them)")
    if q_motor is not None and coupling is not None:
        q_true = np.asarray(q_motor) @ np.asarray(coupling, float).T
    e = np.asarray(recording.q_cmd_rad) - np.asarray(q_true)
    return Tracking(name, np.sqrt(np.mean(e**2, axis=0)), np.max(np.abs(e), axis=0))


def run_with_feedforward(make_robot: Callable[[bool], Any], name: str, ff: FeedForward | None, trajectory,
                         periods: int = 1, transient_periods: int = 0) -> Tracking:
    """Play ``trajectory`` on a fresh twin ``make_robot(feedforward_enabled)`` whose controller takes
    its feed-forward from ``ff`` (None: no feed-forward)."""
    robot = make_robot(ff is not None)
    if not hasattr(robot, "feedforward_source"):
        raise ConfigError(f"control: backend '{robot.info.backend}' is not a twin (task=control runs on mujoco "
                          f"or pybullet)")
    robot.feedforward_source = ff
    try:
        rec = robot.run(trajectory, periods=periods, transient_periods=transient_periods)
    finally:
        robot.close()
    return tracking_error(name, rec, robot.spec.coupling)


@dataclass
class ControlComparison:
    """Per-joint RMS reference error of every feed-forward choice and its ratio to ``none``."""

    joint_names: Sequence[str]
    results: list[Tracking]
    info: dict[str, Any] = field(default_factory=dict)

    def by_name(self, name: str) -> Tracking:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def ratio(self, name: str, to: str = "none") -> np.ndarray:
        return self.by_name(name).rms_rad / self.by_name(to).rms_rad

    def to_dict(self) -> dict:
        names = [r.name for r in self.results]
        base = "none" if "none" in names else None
        out = {"joints": list(self.joint_names), "unit": "deg", "info": self.info, "feedforward": {}}
        for r in self.results:
            d = {"rms_deg": r.rms_deg.tolist(), "max_abs_deg": np.degrees(r.max_abs_rad).tolist()}
            if base is not None:
                ratio = self.ratio(r.name, base)
                d["ratio_to_none"] = ratio.tolist()
                d["mean_ratio_to_none"] = float(np.mean(ratio))
            out["feedforward"][r.name] = d
        return out


def format_control_table(d: Mapping[str, Any], digits: int = 4) -> str:
    """Table VII layout: one row per joint, the RMS reference error (deg) of each choice, then the
    ratios to no model."""
    ffs = d["feedforward"]
    names = list(ffs)
    ratio_names = [n for n in names if n != "none" and "ratio_to_none" in ffs[n]]
    head = ["joint"] + [f"{n} (deg)" for n in names] + [f"{n}/none" for n in ratio_names]
    rows = []
    for j, joint in enumerate(d["joints"]):
        rows.append([joint] + [f"{ffs[n]['rms_deg'][j]:.{digits}g}" for n in names]
                    + [f"{ffs[n]['ratio_to_none'][j]:.3f}" for n in ratio_names])
    rows.append(["mean"] + [f"{np.mean(ffs[n]['rms_deg']):.{digits}g}" for n in names]
                + [f"{ffs[n]['mean_ratio_to_none']:.3f}" for n in ratio_names])
    w = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    return "\n".join("  ".join(str(c).rjust(w[i]) for i, c in enumerate(r)) for r in [head] + rows)


def truncated(trajectory, duration_s: float | None):
    """The first ``duration_s`` seconds of a reference, played once (None: the trajectory as is)."""
    from hal.protocol import JointTrajectory

    if duration_s is None:
        return trajectory
    if isinstance(duration_s, bool) or not isinstance(duration_s, (int, float)) or not duration_s > 0:
        raise ConfigError(f"control.duration_s: expected null or a positive duration (s), got {duration_s!r}")
    k = max(2, min(trajectory.n_samples, int(round(duration_s * trajectory.rate_hz))))
    return JointTrajectory(trajectory.t_s[:k], trajectory.q_rad[:k], trajectory.dq_rad_s[:k],
                           trajectory.ddq_rad_s2[:k])


def calibrated_cloos_tracking(cal, model, identification, reference, n_identification: int = 5,
                              seed: int = 0) -> dict:
    """The feed-forward comparison on the CLOOS twin calibrated against the real robot
    (:class:`robident_twin.validation.twin_vs_real.CloosTwin`: transmission error, extra
    friction, elasticity, its P / PI cascade): identify on the twin (``identification``, e.g.
    Trajectory A, replayed ``n_identification`` times, WLS as on the real data), then play the
    ``reference`` (e.g. Trajectory C, one period after a warm-up) with no feed-forward and with
    the twin-identified model's. Returns per-joint RMS position errors (rad, motor coordinates)
    and the ratio identified / none (ICMA 2020 Table VII's figure)."""
    import dataclasses

    from robident_twin.validation import twin_vs_real as tv

    twin = tv.CloosTwin(cal, model)
    run = twin.replay(identification, n_identification, seed)
    beta = tv.fit_statistics("twin", *model, run.data, run.sample_variance_Nm2, {}).beta
    ident = tv.CloosTwin(dataclasses.replace(cal, beta=beta), model, coulomb_eps_rad_s=0.001)
    rms = {name: twin.replay(reference, 1, seed + 1, feedforward=ff).tracking_rms_rad
           for name, ff in (("none", None), ("identified", ident.rigid_motor_torque))}
    return {"rms_rad": rms, "ratio": rms["identified"] / rms["none"], "beta_twin": beta}

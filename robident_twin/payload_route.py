"""Jubien 2014's two experiments for ``model.payload=true`` (task=identify): the robot's excitation
run without the payload and again with it, stacked, so that the robot and the payload (link n+1)
are identified together. In the run without the payload the payload's columns are zero; in the
run with it they are the last link's columns carried to the mounting frame. Neither run alone
separates the payload from the last link; the two together do.

The pipeline's own acquisition is the run without the payload (and the validation run, also
without it); :func:`loaded_run` adds the run with it: on a twin the same twin with the payload of
the ``payload`` config mounted, with ``backend=file`` the recording ``payload.recording``.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from robident_twin.errors import ConfigError

if TYPE_CHECKING:
    from robident_twin.config import RunConfig
    from robident_twin.model.config import PayloadConfig

#: estimators that take the stacked (W, tau) of the two runs (IV, ML and DIDIM rebuild one run's data)
ROUTE_ESTIMATORS = ("ols", "wls", "tls")


def route_spec(spec, run: RunConfig):
    """The robot of the two-experiment route: the ``payload`` config's payload, not mounted (the
    pipeline's own runs are without it)."""
    from robident_twin.model.payload import with_payload_config

    name = run.estimator.name
    if name not in ROUTE_ESTIMATORS:
        raise ConfigError(f"estimator.name: model.payload=true stacks the runs without and with the payload; "
                          f"expected one of {list(ROUTE_ESTIMATORS)}, got {name!r}")
    spec = with_payload_config(spec, run.payload, attached=False)
    if spec.payload is None:
        raise ConfigError(f"model.payload: robot {spec.name} ({spec.source}) has no payload; define one with "
                          "payload.mass_kg, payload.com_m and payload.inertia_com_kgm2")
    return spec


def refuse_unused(payload_cfg: PayloadConfig) -> None:
    """task=identify without model.payload: a payload defined in the config would be ignored."""
    for k in ("mass_kg", "com_m", "inertia_com_kgm2", "mount_xyz_m", "mount_rpy_rad", "recording"):
        if getattr(payload_cfg, k) is not None:
            raise ConfigError(f"payload.{k}: the payload config is used by task=payload and model.payload=true; "
                              "task=identify without model.payload mounts only the robot file's payload "
                              "(robot.payload_attached=true)")


def loaded_run(run: RunConfig, spec, reference, periods: int, transient: int, out_dir: Path | None):
    """The excitation run with the payload mounted (a twin carrying it, or the file payload.recording)."""
    from hal.factory import make_robot
    from hal.files.npz_recording import save_recording
    from robident_twin.design.dryrun import dryrun_checks_for_backend
    from robident_twin.model.build import twin_spec
    from robident_twin.processing.plausibility import check_recording

    loaded = spec.with_payload(True)
    backend = run.backend
    if backend.name == "file":
        path = run.payload.recording
        if not path:
            raise ConfigError("payload.recording: model.payload=true with backend=file needs the excitation recorded "
                              "WITH the payload (backend.path is the one without it)")
        backend = dataclasses.replace(backend, path=path, validation_path=None)
    sim = twin_spec(loaded, run.friction)
    robot = make_robot(sim, backend, run.noise, seed=run.seed + 1, twin_cfg=run.twin,
                       checks=dryrun_checks_for_backend(sim, backend))
    try:
        rec = robot.run(reference, periods=periods, transient_periods=transient)
    finally:
        robot.close()
    check_recording(rec, loaded, "excitation recording with the payload")
    if out_dir is not None and run.acquisition.save_recordings:
        save_recording(rec, Path(out_dir) / "recording_excitation_payload.npz")
    return rec


def stacked(free, loaded):
    """The two runs' processed data, one after the other, with the per-sample payload state."""
    if free.measurement != loaded.measurement or free.n_joints != loaded.n_joints:
        raise ConfigError("model.payload: the runs without and with the payload differ in channels")
    cat = lambda a, b: None if a is None or b is None else np.concatenate([a, b])  # noqa: E731
    var = None if free.tau_var_Nm2 is None or loaded.tau_var_Nm2 is None else \
        0.5 * (np.asarray(free.tau_var_Nm2) + np.asarray(loaded.tau_var_Nm2))
    return dataclasses.replace(
        free, q_rad=cat(free.q_rad, loaded.q_rad), dq_rad_s=cat(free.dq_rad_s, loaded.dq_rad_s),
        ddq_rad_s2=cat(free.ddq_rad_s2, loaded.ddq_rad_s2), tau_Nm=cat(free.tau_Nm, loaded.tau_Nm),
        tau_var_Nm2=var, tau_var_sample_Nm2=cat(free.tau_var_sample_Nm2, loaded.tau_var_sample_Nm2),
        payload_attached=np.concatenate([np.zeros(free.n_samples, bool), np.ones(loaded.n_samples, bool)]))


def payload_part(summary: Mapping[str, Any], n_joints: int) -> dict[str, Any] | None:
    """The payload's ten base parameters of a two-experiment summary (names of link n+1), with the
    figures of the acceptance when the truth is there."""
    names = {f"{k}{n_joints + 1}" for k in ("XX", "XY", "XZ", "YY", "YZ", "ZZ", "MX", "MY", "MZ", "M")}
    params = [p for p in summary.get("parameters", []) if p["name"].rstrip("R") in names]
    if not params:
        return None
    out: dict[str, Any] = {"parameters": params}
    if all("true" in p for p in params):
        z = [abs(p["estimate"] - p["true"]) / p["std"] for p in params]
        out["max_abs_z"] = float(max(z))
        out["within_3std"] = int(sum(v <= 3 for v in z))
    return out

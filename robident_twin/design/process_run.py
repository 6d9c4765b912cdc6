"""Process and recorded trajectories in ``task=identify`` (``trajectory=pick_and_place|square|recorded``):
their references, checked by the dry run before the first command.
"""
from __future__ import annotations

from typing import Any

from robident_twin.errors import TrajectoryError
from robident_twin.model.robot import RobotSpec


def checked_references(spec: RobotSpec, run, rate_hz: float, is_simulation: bool):
    """(reference, validation reference, dry-run summary) of a non-Fourier ``trajectory`` group.

    Both references pass the dry run (:func:`robident_twin.design.dryrun.dry_run`: kinematic
    limits, nominal torques, ``design.constraints``) before anything moves; a failure is a
    TrajectoryError naming the reason. On a twin: ``design.constraints``, and the twin is not run
    twice (the acquisition is the simulation); for a real controller: its ``backend.safety``
    settings, and the record is written to ``backend.records_dir`` for the HAL's gate (not yet
    exercised against an emulated controller by a test). A recorded
    file is only checked when it is played (not with ``backend=file``)."""
    import dataclasses

    from robident_twin.design.dryrun import DryRunConfig, dry_run
    from robident_twin.design.stored import trajectory_references

    backend = run.backend
    ref, val_ref, _ = trajectory_references(spec, run.trajectory, backend, rate_hz)
    if backend.name == "file":
        return ref, val_ref, {"checked": False, "reason": "recorded files are played back, nothing moves"}
    if is_simulation:  # the design group's constraints; the acquisition itself is the simulation
        config = DryRunConfig.from_design(run.design)
        config = dataclasses.replace(config, rate_hz=float(rate_hz), simulate=False)
        records_dir = None
    else:  # a real controller: the settings and records folder its gate checks (dryrun_checks_for_backend)
        from robident_twin.design.dryrun import safety_config

        config = safety_config(backend.safety)
        records_dir = backend.records_dir
    out: dict[str, Any] = {"checked": True}
    for what, jt in (("identification", ref), ("validation", val_ref)):
        rep = dry_run(jt, spec, config, write=not is_simulation, records_dir=records_dir)
        if not rep.passed:
            raise TrajectoryError(f"dry run FAILED for the {run.trajectory.kind} {what} trajectory: "
                                  + "; ".join(rep.reasons))
        worst = {m.kind: round(float(m.margin), 6) for m in rep.margins
                 if m.kind in ("position", "velocity", "acceleration", "torque")}
        out[what] = {"passed": True, "duration_s": float(jt.n_samples / rate_hz), "margins": worst}
    return ref, val_ref, out

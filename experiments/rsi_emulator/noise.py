"""IR 361 with sensor noise: identification through the RSI emulator (correction mode: the PC
streams the trajectory, XML over UDP) against identification on the MuJoCo twin directly.

Prints, per seed, (estimate - truth) / std of the friction parameters of axes 2-3, ZZ2R and KS2
for both paths (OLS, 4 recorded periods of the 4 s design tests/data/kuka_ir361_4s.yaml at
250 Hz). About 1 min.

    python experiments/rsi_emulator/noise.py
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from hal.real.rsi import make_rsi_robot
from hal.sim.mujoco_backend import MujocoTwin
from hal.sim.sensors import SensorNoise
from robident_twin.design.dryrun import design_checks, dry_run, safety_config
from robident_twin.estimation.estimators import estimate
from robident_twin.model.build import build_model, model_options
from robident_twin.design.stored import reference, resolve_design
from robident_twin.model.robot import load_robot
from robident_twin.processing.signal import process_periodic

ROOT = Path(__file__).resolve().parents[2]
SHOWN = ("Fvm2", "Fcm2", "Fvm3", "Fcm3", "ZZ2R", "KS2")


def main(seeds=(0, 1), periods: int = 4) -> None:
    spec = load_robot("kuka_ir361")
    ref = reference(resolve_design(ROOT / "tests" / "data" / "kuka_ir361_4s.yaml", spec), 250.0)
    model = build_model(spec, model_options({"measurement": "motor_torque", "offsets": None,
                                             "drive_inertia": None}, {}))
    true = model.true_base()
    sel = [model.base.names.index(n) for n in SHOWN]

    def z(rec) -> np.ndarray:
        data = process_periodic(rec, "motor_torque", 5)
        est = estimate("ols", model.base_regressor(data), data.tau_Nm, model.base.names)
        return ((est.beta - true) / est.std)[sel]

    print(f"(estimate - true) / std for {', '.join(SHOWN)}")
    for seed in seeds:
        direct = MujocoTwin(spec, SensorNoise.from_config(spec), seed=seed, control_rate_hz=250.0)
        print(f"seed {seed} MuJoCo directly: {np.round(z(direct.run(ref, periods, 1)), 2)}")
        with tempfile.TemporaryDirectory() as tmp:
            rob = make_rsi_robot(spec, {"name": "rsi", "emulate": True, "records_dir": tmp, "mode": "correction"},
                                 SensorNoise.from_config(spec), seed)
            # the emulator serves the twin: certify the trajectory as task=dryrun would
            rob.attach_checks(design_checks(spec, {"dryrun": {"simulate": False}}, tmp))
            dry_run(ref, spec, safety_config({"dryrun": {"simulate": False}}), records_dir=tmp)
            try:
                rec = rob.run(ref, periods, 1)
            finally:
                rob.close()
        print(f"seed {seed} through RSI:     {np.round(z(rec), 2)}  (link {rec.metadata['link']['lost']} lost)")


if __name__ == "__main__":
    main()

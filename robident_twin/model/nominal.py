"""A CAD-like nominal model of a robot: its robot file with perturbed inertials, as a manufacturer's
CAD data would give them (priors, bounds and starting points come from it, never from a twin's truth).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from robident_twin.errors import ConfigError
from robident_twin.model.robot import FrictionVariant, LinkInertial, RobotSpec

# --------------------------------------------------------------------------- nominal (CAD) model


def _round_sig(x: float, digits: int) -> float:
    return float(f"{x:.{digits - 1}e}") if x != 0 else 0.0


def cad_nominal(spec: RobotSpec, seed: int = 0, mass_rel: float = 0.10, com_m: float = 0.01,
                inertia_rel: float = 0.20) -> RobotSpec:
    """A CAD-like nominal model of a twin whose robot file is the ground truth.

    Per link (seeded, reproducible): mass x (1 + mass_rel u), COM + com_m u (each axis),
    principal central moments x (1 + inertia_rel u) (principal axes kept, triangle
    inequality restored if broken), with u uniform in [-1, 1]; rounded to CAD precision
    (mass 0.01 kg, COM 1 mm, inertia 3 significant digits). No drive inertia and no
    friction (a CAD model has neither), no motor offsets; springs, payload, kinematics,
    limits and sensors as in the robot file."""
    if not (mass_rel >= 0 and com_m >= 0 and inertia_rel >= 0) or mass_rel >= 1 or inertia_rel >= 1:
        raise ConfigError(f"nominal: mass_rel and inertia_rel must be in [0, 1) and com_m >= 0, got "
                          f"{mass_rel}, {inertia_rel}, {com_m}")
    rng = np.random.default_rng(seed)

    def perturb(link: LinkInertial) -> LinkInertial:
        u = rng.uniform(-1, 1, 7)
        m = round(link.mass_kg * (1 + mass_rel * u[0]), 2)
        c = np.round(link.com_m + com_m * u[1:4], 3)
        w, V = np.linalg.eigh(link.inertia_com_kgm2)
        w = w * (1 + inertia_rel * u[4:7])
        w = np.sort(w)
        w[2] = min(w[2], w[0] + w[1])  # triangle inequality
        I = V @ np.diag(w) @ V.T
        I = np.array([[_round_sig(x, 3) for x in row] for row in I])
        I = 0.5 * (I + I.T)
        return LinkInertial(float(m), c, I)

    joints = []
    for j in spec.joints:
        joints.append(dataclasses.replace(
            j, link=perturb(j.link), drive_inertia_kgm2=0.0, fv_link_Nms_rad=0.0, fc_link_Nm=0.0,
            fv_motor_Nms_rad=0.0, fc_motor_Nm=0.0, offset_motor_Nm=0.0,
            friction_link_variant=FrictionVariant(), friction_motor_variant=FrictionVariant()))
    return dataclasses.replace(spec, name=f"{spec.name}_cad", description=f"CAD-like nominal model of {spec.name}",
                               joints=tuple(joints), _cache={})

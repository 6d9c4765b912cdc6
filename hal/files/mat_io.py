"""MATLAB .mat recordings: the shared CLOOS QRC 350 dataset and a generic file with named variables.

CLOOS (ICMA 2020) files are recognised by their variables (``time_vec_save`` with ``q_meas``
structs, or ``deg_q``) and read by :mod:`robident_twin.datasets.cloos_icma2020` (not rewritten
here). Each identification file holds one period averaged over 50 repetitions, so it becomes a
Recording of one period (``period_samples`` = N, ``n_periods`` = 1) of joint positions and motor
torques; the per-sample variance over the repetitions is kept in
``metadata["tau_sample_variance_Nm2"]``.

A generic .mat file holds one variable per channel (samples x joints, or joints x samples):

=====================  ===============================================================
variable               meaning
=====================  ===============================================================
``t_s`` / ``t_ms``     time (required)
``q_rad`` / ``q_deg``  measured position (required)
``tau_motor_Nm``       motor torque (required)
``tau_joint_Nm``       joint-torque-sensor torque (optional)
``q_cmd_rad`` / _deg   commanded position (optional)
``sample_rate_hz``,    scalars (optional)
``period_samples``,
``n_periods``
=====================  ===============================================================

``variables={"q_rad": "pos"}`` maps other variable names onto these (the unit is then taken
from the key: ``{"q_deg": "pos"}`` reads ``pos`` as degrees).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from robident_twin.errors import RobidentError

from ..protocol import Recording
from .common import FileFormatError, atomic_path, make_recording, refuse_near_misses

_SCALARS = ("sample_rate_hz", "period_samples", "n_periods")
_UNIT = {"t_s": 1.0, "t_ms": 1e-3, "q_rad": 1.0, "q_deg": np.pi / 180, "q_cmd_rad": 1.0,
         "q_cmd_deg": np.pi / 180, "tau_motor_Nm": 1.0, "tau_joint_Nm": 1.0}


def _loadmat(path: Path) -> dict:
    import scipy.io

    if not path.is_file():
        raise FileFormatError(f"{path}: file not found")
    try:
        return scipy.io.loadmat(str(path), squeeze_me=True, struct_as_record=False)
    except Exception as exc:  # scipy raises several types for a corrupt file
        raise FileFormatError(f"{path}: not a readable MATLAB .mat file (v4-v7.2): {exc}") from exc


def is_cloos(mat: Mapping[str, Any]) -> str | None:
    """'averaged' / 'plain' for a CLOOS ICMA 2020 file, else None."""
    if "time_vec_save" not in mat:
        return None
    if "q_meas" in mat and "tau_meas" in mat:
        return "averaged"
    if "deg_q" in mat and "tau" in mat:
        return "plain"
    return None


def read_cloos(path: str | Path) -> Recording:
    """A CLOOS ICMA 2020 file as a Recording (:mod:`hal.files.cloos_icma2020`)."""
    from . import cloos_icma2020 as ds

    path = Path(path).resolve()
    kind = is_cloos(_loadmat(path))
    if kind is None:
        raise FileFormatError(f"{path}: not a CLOOS ICMA 2020 file (variables time_vec_save and "
                              "q_meas/tau_meas or deg_q/tau expected)")
    # the dataset importer loads by name below its root: find the name, or stage a link
    name = next((n for n, (rel, k) in ds.FILES.items() if path.as_posix().endswith(rel)), None)
    if name is not None:
        root = Path(path.as_posix()[: -len(ds.FILES[name][0])])
        cr = ds.read_arrays(name, root=root)
    else:
        name = next(n for n, (rel, k) in ds.FILES.items() if k == kind)
        with tempfile.TemporaryDirectory() as tmp:
            link = Path(tmp) / ds.FILES[name][0]
            link.parent.mkdir(parents=True)
            os.symlink(path, link)
            try:
                cr = ds.read_arrays(name, root=tmp)
            except RobidentError as exc:  # name the user's file, not the staged link
                raise FileFormatError(str(exc).replace(str(link), str(path))) from None
    N = cr.time_s.size
    md = {"source": str(path), "format": "cloos_icma2020", "dataset_file": name, "robot": "cloos_qrc350",
          "units": {"t": "s", "q": "rad (joint coordinates)", "tau": "Nm (motor torques, joint side)"},
          "measurement": "motor_torque", "n_repetitions": int(cr.n_repetitions), "desired_positions": cr.desired}
    if cr.tau_sample_variance_Nm2 is not None:
        md["tau_sample_variance_Nm2"] = cr.tau_sample_variance_Nm2
    md["dq_rad_s"], md["ddq_rad_s2"] = cr.dq_rad_s, cr.ddq_rad_s2
    return make_recording(path, t_s=cr.time_s, q_rad=cr.q_rad, tau_motor_Nm=cr.tau_Nm,
                          q_cmd_rad=cr.q_rad if cr.desired else None,
                          sample_rate_hz=1.0 / float(np.median(np.diff(cr.time_s))),
                          period_samples=N, n_periods=1, metadata=md)


def _matrix(path: Path, var: str, value, N: int | None) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype.kind not in "biuf":
        kind = "text" if a.dtype.kind in "US" else "complex numbers" if a.dtype.kind == "c" else \
            f"a {type(value).__name__} ({a.dtype})"
        raise FileFormatError(f"{path}: variable {var}: expected a real numeric array, got {kind}")
    a = a.astype(float)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise FileFormatError(f"{path}: variable {var}: expected samples x joints, got shape {a.shape}")
    if N is not None and a.shape[0] != N and a.shape[1] == N:
        a = a.T
    if N is not None and a.shape[0] != N:
        raise FileFormatError(f"{path}: variable {var}: {a.shape[0]} samples (shape {a.shape}), the time "
                              f"variable has {N}")
    return a


def read_mat(path: str | Path, variables: Mapping[str, str] | None = None) -> Recording:
    """Import a .mat recording: the CLOOS dataset format, else the generic named variables."""
    path = Path(path)
    mat = _loadmat(path)
    if is_cloos(mat) and not variables:
        return read_cloos(path)
    names = dict(variables or {})
    present = sorted(k for k in mat if not k.startswith("__"))
    if not variables:
        refuse_near_misses(path, [k for k in present if k not in _UNIT and k not in _SCALARS], [*_UNIT, *_SCALARS],
                           "variable", cutoff=0.85)

    def find(*keys, required=False):
        for k in keys:
            v = names.get(k, k)
            if v in mat:
                return k, v, mat[v]
        if required:
            raise FileFormatError(f"{path}: missing variable {' or '.join(names.get(k, k) for k in keys)} "
                                  f"(file has {present})")
        return None, None, None

    tk, tv, t = find("t_s", "t_ms", required=True)
    t = _matrix(path, tv, t, None)
    if min(t.shape) != 1:
        raise FileFormatError(f"{path}: variable {tv}: expected a vector of times, got shape {t.shape}")
    t = t.reshape(-1) * _UNIT[tk]
    N = t.size
    out, cols = {}, {"t_s": [tv]}
    for field, keys, req in (("q_rad", ("q_rad", "q_deg"), True), ("tau_motor_Nm", ("tau_motor_Nm",), True),
                             ("tau_joint_Nm", ("tau_joint_Nm",), False),
                             ("q_cmd_rad", ("q_cmd_rad", "q_cmd_deg"), False)):
        k, v, val = find(*keys, required=req)
        if k is None:
            out[field] = None
            continue
        out[field] = _matrix(path, v, val, N) * _UNIT[k]
        cols[field] = [f"{v}(:, {j + 1})" for j in range(out[field].shape[1])]
    scal = {}
    for key in ("sample_rate_hz", "period_samples", "n_periods"):
        if key in mat:
            a = np.asarray(mat[key])
            if a.dtype.kind not in "biuf" or a.size != 1:
                raise FileFormatError(f"{path}: variable {key}: expected one number, got "
                                      f"{'text' if a.dtype.kind in 'US' else a.dtype} of shape {a.shape}")
            scal[key] = float(a.reshape(-1)[0])
    md = {"source": str(path), "format": "mat", "variables": present,
          "units": {"t": "s", "q": "rad", "tau": "Nm"}}
    return make_recording(path, t_s=t, **out, sample_rate_hz=scal.get("sample_rate_hz"),
                          period_samples=scal.get("period_samples"), n_periods=scal.get("n_periods"),
                          metadata=md, row=lambda k: f"row {k + 1}", columns=cols, rate_field="variable sample_rate_hz")


def write_mat(rec: Recording, path: str | Path) -> Path:
    """Export a recording as a generic .mat file (the variables read by :func:`read_mat`); atomic."""
    import scipy.io

    d = {"t_s": rec.t_s, "q_rad": rec.q_rad, "tau_motor_Nm": rec.tau_motor_Nm, "q_cmd_rad": rec.q_cmd_rad,
         "sample_rate_hz": rec.sample_rate_hz}
    if rec.tau_joint_Nm is not None:
        d["tau_joint_Nm"] = rec.tau_joint_Nm
    if rec.period_samples is not None and rec.n_periods is not None:
        d["period_samples"], d["n_periods"] = rec.period_samples, rec.n_periods
    with atomic_path(path, suffix=".mat") as tmp:
        scipy.io.savemat(str(tmp), d)
    return Path(path)

"""Does a candidate unmodelled effect explain the real CLOOS residual? (issue 15, the wrist)

The test behind ``experiments/twin_vs_real_cloos/analyse_wrist.py``: per joint J3-J6 and per
candidate basis (a torque of the wrist pose, as the torch's hose package would give; slowly
varying friction forms), the real Trajectory A residual (measured torque - the authors'
35-parameter WLS model) is fitted by least squares (a constant added) and the fit is judged by

* the share of A's residual energy it explains, against two controls with the same number of
  columns: the same basis of the states shifted by half a period (same spectra, no physical link
  to the torque) and random smooth periodic signals below 2 Hz;
* cross-validation: the coefficients fitted on A applied to Trajectory C and the two process
  validation files (RMS of the prediction error with / without the term; < 1 = it transfers);
* the residual autocorrelation at 100 ms on A and C before and after removing the fitted term.

Data are plain dicts per file (:func:`load`): ``q`` joint positions, ``qm``/``dqm`` motor
positions/velocities (joint side), ``tm`` the model torque, ``r`` the residual, ``fs`` the rate.
"""
from __future__ import annotations

import itertools

import numpy as np
from scipy.signal import lfilter

from robident_twin.datasets import cloos_icma2020 as ds
from robident_twin.datasets.cloos_model import build_model, model_torque_Nm
from robident_twin.validation import twin_vs_real as tv

JOINTS = (2, 3, 4, 5)  # J3..J6 (0-based)
SETS = ("A",) + tv.VALIDATION_SETS
LAG_S = 0.100


def _sgn(v):
    return np.tanh(v / 0.001)  # the authors' Coulomb smoothing


def _lowpass_periodic(x, tau_s, fs):
    """First-order low-pass in its periodic steady state (the record is one period)."""
    a = np.exp(-1.0 / (tau_s * fs))
    return lfilter([1 - a], [1, -a], np.tile(x, 4))[-len(x):]


def _dahl(qm, dqm, sigma_rad):
    """Presliding friction state (Dahl): z -> sign(dq) over about ``sigma_rad`` of travel."""
    z, zi = np.empty_like(qm), np.sign(dqm[0])
    step = np.abs(np.diff(qm, prepend=qm[:1]))
    for i in range(len(qm)):
        s = np.sign(dqm[i])
        zi = s + (zi - s) * np.exp(-step[i] / sigma_rad)
        z[i] = zi
    return z


def pose_basis(q, order: int, axes, cross: bool):
    """Fourier terms of each axis's position up to ``order``, plus first-order products of pairs."""
    cols = [f(k * q[:, a]) for a in axes for k in range(1, order + 1) for f in (np.cos, np.sin)]
    if cross:
        cols += [f(q[:, i]) * g(q[:, j]) for i, j in itertools.combinations(axes, 2)
                 for f in (np.cos, np.sin) for g in (np.cos, np.sin)]
    return np.column_stack(cols)


def candidates():
    """name -> f(data dict, joint) -> columns. The pose bases are the same for every joint."""
    pose = lambda order, axes, cross: (lambda d, j: pose_basis(d["q"], order, axes, cross))
    return {
        "pose q4-q6, order 1": pose(1, (3, 4, 5), False),
        "pose q4-q6, order 2": pose(2, (3, 4, 5), False),
        "pose q4-q6, order 3": pose(3, (3, 4, 5), False),
        "pose q4-q6, order 1 + cross": pose(1, (3, 4, 5), True),
        "pose q4-q6, order 2 + cross": pose(2, (3, 4, 5), True),
        "pose q3-q6, order 1 + cross": pose(1, (2, 3, 4, 5), True),
        "Coulomb(q_j): sgn x own pose order 2": lambda d, j: _sgn(d["dqm"][:, j])[:, None] * pose_basis(d["q"], 2, (j,), False),
        "Coulomb+viscous(q_j), order 1": lambda d, j: np.column_stack(
            [g * f(d["q"][:, j]) for g in (_sgn(d["dqm"][:, j]), d["dqm"][:, j]) for f in (np.cos, np.sin)]),
        "presliding (Dahl) 0.02/0.1/0.3 rad": lambda d, j: np.column_stack(
            [_dahl(d["qm"][:, j], d["dqm"][:, j], s) for s in (0.02, 0.1, 0.3)]),
        "low-passed sgn(dq) 0.05-1 s": lambda d, j: np.column_stack(
            [_lowpass_periodic(_sgn(d["dqm"][:, j]), t, d["fs"]) for t in (0.05, 0.2, 0.5, 1.0)]),
        "load-dependent Coulomb": lambda d, j: np.column_stack(
            [_sgn(d["dqm"][:, j]) * np.abs(d["tm"][:, j]), _sgn(d["dqm"][:, j]) * d["tm"][:, j]]),
        # the best of a scan of resonances 0.3-3 Hz (damping 0.05-0.4) driven by any joint's velocity or
        # acceleration or the own friction sign, chosen on A for J6 (so its A share is optimistic)
        "1.1 Hz resonance (damping 0.2) of sgn(dq)": lambda d, j: _resonance(_sgn(d["dqm"][:, j]), d["fs"], 1.1, 0.2),
    }


def _resonance(u, fs, f0_hz, damping):
    """Periodic steady-state response of a second-order resonance to ``u``: the low-pass output and
    its rate scaled by 1/w0 (two columns, any phase)."""
    n = len(u)
    s = 2j * np.pi * np.fft.rfftfreq(n, 1.0 / fs)
    w0 = 2 * np.pi * f0_hz
    H = np.fft.rfft(u - u.mean()) * w0 ** 2 / (s ** 2 + 2 * damping * w0 * s + w0 ** 2)
    return np.column_stack([np.fft.irfft(H, n=n), np.fft.irfft(H * s / w0, n=n)])


def load(root=None) -> dict:
    """The real files' residual data (see the module docstring), from the dataset folder."""
    model = build_model(symmetric=True)
    real, recs = tv.real_statistics(root, model)
    return residual_data(real, recs, model)


def residual_data(real: tv.FitStatistics, recs: dict, model) -> dict:
    """The real residual of each file under the Trajectory A WLS parameters, with its states."""
    reg, base = model
    Cinv = np.linalg.inv(ds.coupling_matrix())
    out = {}
    for n in SETS:
        d = recs[n].data
        tm = model_torque_Nm(reg, base, d, real.beta)
        out[n] = {"q": d.q_rad, "qm": d.q_rad @ Cinv.T, "dqm": d.dq_rad_s @ Cinv.T, "tm": tm,
                  "r": d.tau_Nm - tm, "fs": d.sample_rate_hz}
    return out


def with_pose_torque(data: dict, rms_fraction: float, seed: int = 1) -> dict:
    """A copy of ``data`` whose residuals carry a synthetic torque of the wrist pose on J3-J6 (random
    coefficients on cos/sin of q4, q5, q6 and cos q5 sin q6, the same function in every file), with an
    RMS on A of ``rms_fraction`` x the real residual's: what :func:`evaluate` must find if it is there."""
    rng = np.random.default_rng(seed)
    out = {n: dict(d, r=d["r"].copy()) for n, d in data.items()}
    f = lambda q: np.column_stack([pose_basis(q, 1, (3, 4, 5), False), np.cos(q[:, 4]) * np.sin(q[:, 5])])
    for j in JOINTS:
        c = rng.standard_normal(7)
        h = f(data["A"]["q"]) @ c
        scale = rms_fraction * np.sqrt(np.mean(data["A"]["r"][:, j] ** 2)) / np.std(h)
        for n in out:
            out[n]["r"][:, j] += scale * (f(data[n]["q"]) @ c)
    return out


def _fit(G, y):
    G = np.column_stack([G, np.ones(len(G))])
    c, *_ = np.linalg.lstsq(G, y, rcond=None)
    return c, G @ c


def _share(y, fit):
    return 1.0 - np.mean((y - fit) ** 2) / np.mean((y - y.mean()) ** 2)


def _random_smooth(rng, n, m, fs, f_max_hz=2.0):
    f = np.fft.rfftfreq(n, 1.0 / fs)
    band = (f > 0) & (f <= f_max_hz)
    F = np.zeros((f.size, m), complex)
    F[band] = rng.standard_normal((band.sum(), m)) + 1j * rng.standard_normal((band.sum(), m))
    return np.fft.irfft(F, n=n, axis=0)


def evaluate(data, basis, n_random: int = 5, seed: int = 0) -> dict:
    """Per joint: share on A, controls, transfer ratios, ACF at 100 ms before/after."""
    rng = np.random.default_rng(seed)
    A = data["A"]
    res = {k: [] for k in ("share", "shifted", "random", "acf_A", "acf_A_after", "acf_C", "acf_C_after")}
    res["transfer"] = {n: [] for n in SETS[1:]}
    half = len(A["r"]) // 2
    shifted = dict(A, **{k: np.roll(A[k], half, axis=0) for k in ("q", "qm", "dqm", "tm")})
    lag = lambda d: round(LAG_S * d["fs"])
    for j in JOINTS:
        GA, y = basis(A, j), A["r"][:, j]
        c, fit = _fit(GA, y)
        res["share"].append(_share(y, fit))
        res["shifted"].append(_share(y, _fit(basis(shifted, j), y)[1]))
        res["random"].append(np.mean([_share(y, _fit(_random_smooth(rng, len(y), GA.shape[1], A["fs"]), y)[1])
                                      for _ in range(n_random)]))
        res["acf_A"].append(tv.autocorrelation(y[:, None], lag(A))[0])
        res["acf_A_after"].append(tv.autocorrelation((y - fit)[:, None], lag(A))[0])
        for n in SETS[1:]:
            d = data[n]
            e = d["r"][:, j] - np.column_stack([basis(d, j), np.ones(len(d["r"]))]) @ c
            res["transfer"][n].append(np.sqrt(np.mean(e ** 2) / np.mean(d["r"][:, j] ** 2)))
            if n == "C":
                res["acf_C"].append(tv.autocorrelation(d["r"][:, j:j + 1], lag(d))[0])
                res["acf_C_after"].append(tv.autocorrelation(e[:, None], lag(d))[0])
    res["columns"] = basis(A, JOINTS[0]).shape[1]
    return res

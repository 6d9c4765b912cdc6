"""Base parameters by numerical QR decomposition (Gautier's method).

On a regressor built from random states, a QR decomposition with column
pivoting gives the rank b (the number of base parameters). The base set is
then chosen greedily in the standard order (link 1 first, Khalil order within
a link), which keeps the classical regrouping pattern (``ZZ1R``, ``XX2R`` ...):
a standard column is kept when it is not in the span of those kept before it.
The dependent columns satisfy W_d = W_b B, so with K = [I | B] (in standard
column order) the base vector is beta = K chi and W chi = W_b beta.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.linalg

from robident_twin.atomic import atomic_path
from robident_twin.errors import IdentificationError
from robident_twin.paths import cache_dir
from robident_twin.model.names import base_name
from robident_twin.model.regressor import Regressor

_COEF_ZERO = 1e-9


@dataclass(frozen=True)
class BaseParameters:
    """A base parameter set: beta = K chi, W_base = W_std[:, base_index]."""

    standard_names: tuple[str, ...]
    standard_units: tuple[str, ...]
    base_index: np.ndarray  # (b,) standard columns kept
    K: np.ndarray  # (b, p) regrouping matrix
    names: tuple[str, ...]

    @property
    def n_base(self) -> int:
        return len(self.base_index)

    @property
    def units(self) -> tuple[str, ...]:
        return tuple(self.standard_units[i] for i in self.base_index)

    def from_standard(self, chi: np.ndarray) -> np.ndarray:
        """Base vector of a standard vector."""
        return self.K @ chi

    def columns(self, W_std: np.ndarray) -> np.ndarray:
        """Base regressor from a standard regressor."""
        return W_std[:, self.base_index]

    def regrouped(self, i: int) -> list[tuple[str, float]]:
        """The standard parameters that base parameter i regroups, with coefficients."""
        row = self.K[i]
        return [(self.standard_names[k], float(row[k])) for k in np.flatnonzero(row)]

    def relation(self, i: int) -> str:
        """Human-readable relation, e.g. ``XX2R = XX2 - 1*YY2 + ...``."""
        terms = []
        for name, c in self.regrouped(i):
            if abs(c - 1.0) < 1e-12:
                terms.append(f"+ {name}")
            elif abs(c + 1.0) < 1e-12:
                terms.append(f"- {name}")
            else:
                terms.append(f"{'+' if c >= 0 else '-'} {abs(c):.10g}*{name}")
        rhs = " ".join(terms)
        rhs = rhs[2:] if rhs.startswith("+ ") else rhs
        return f"{self.names[i]} = {rhs}"

    def relations(self) -> list[str]:
        return [self.relation(i) for i in range(self.n_base)]


def _greedy_independent(Wn: np.ndarray, tol: float) -> list[int]:
    """Indices of columns (in order) that are not in the span of the kept ones."""
    kept: list[int] = []
    Q = np.zeros((Wn.shape[0], 0))
    for k in range(Wn.shape[1]):
        c = Wn[:, k]
        r = c - Q @ (Q.T @ c)
        r = r - Q @ (Q.T @ r)  # re-orthogonalise once for stability
        nr = np.linalg.norm(r)
        if nr > tol:
            kept.append(k)
            Q = np.column_stack([Q, r / nr])
    return kept


#: bump when the base-parameter computation changes: older cache entries are then never read
_CACHE_VERSION = 1


def _cache_file(W: np.ndarray, tol: float, names, units) -> Path:
    """The cache entry of a base-parameter computation, keyed by a hash of everything its result
    depends on: the random-state regressor itself (so any change of the model, its options or of
    ``base.n_samples`` / ``base.seed`` misses), the tolerance, the parameter names and units."""
    h = hashlib.sha256(f"base-parameters v{_CACHE_VERSION} tol={tol!r} shape={W.shape}".encode())
    h.update(np.ascontiguousarray(W, dtype=float).tobytes())
    h.update(json.dumps([list(names), list(units)]).encode())
    return cache_dir() / "base_parameters" / f"{h.hexdigest()}.npz"


def _cached(path: Path, names, units, p: int) -> BaseParameters | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            base_index, K, base_names = z["base_index"], z["K"], tuple(str(x) for x in z["names"])
    except (OSError, ValueError, KeyError):  # unreadable or half-written by a foreign tool: recompute
        return None
    if K.shape != (base_index.size, p) or len(base_names) != base_index.size:
        return None
    return BaseParameters(tuple(names), tuple(units), base_index, K, base_names)


def _store(path: Path, base: BaseParameters) -> None:
    try:
        with atomic_path(path, suffix=".npz") as tmp:  # concurrent writers: the last rename wins, whole
            np.savez(tmp, base_index=base.base_index, K=base.K, names=np.array(base.names))
    except OSError:  # a read-only or full cache never stops a run
        pass


def compute_base_parameters(regressor: Regressor, n_samples: int = 300, seed: int = 0,
                            tol: float = 1e-8) -> BaseParameters:
    """Numerical base parameters of a regressor from ``n_samples`` random states (read from the
    user cache, :func:`robident_twin.paths.cache_dir`, when computed before for the same model)."""
    rng = np.random.default_rng(seed)
    states = regressor.random_states(n_samples, rng)
    if regressor.options.payload:  # identified from experiments with and without it
        W = regressor.stack(*states, payload_attached=np.arange(n_samples) % 2 == 0)
    else:
        W = regressor.stack(*states)
    path = _cache_file(W, tol, regressor.names, regressor.units)
    base = _cached(path, regressor.names, regressor.units, W.shape[1])
    if base is None:
        base = _compute(W, tuple(regressor.names), tuple(regressor.units), tol)
        _store(path, base)
    return base


def _compute(W: np.ndarray, std_names: tuple, std_units: tuple, tol: float) -> BaseParameters:
    norms = np.linalg.norm(W, axis=0)
    p = W.shape[1]
    nonzero = norms > tol * max(norms.max(), 1.0)
    Wn = np.zeros_like(W)
    Wn[:, nonzero] = W[:, nonzero] / norms[nonzero]
    # rank from QR with column pivoting on the column-normalised regressor
    R = scipy.linalg.qr(Wn, mode="r", pivoting=True)[0]
    diag = np.abs(np.diag(R))
    rank = int(np.sum(diag > tol * diag[0]))
    kept = _greedy_independent(Wn, tol)
    if len(kept) != rank:
        raise IdentificationError(
            f"base parameters: greedy selection found {len(kept)} independent columns but "
            f"pivoted QR rank is {rank}; increase n_samples or adjust tol")
    base = np.array(kept)
    dep = np.array([k for k in range(p) if k not in set(kept)], dtype=int)
    K = np.zeros((rank, p))
    K[np.arange(rank), base] = 1.0
    if dep.size:
        B, *_ = np.linalg.lstsq(W[:, base], W[:, dep], rcond=None)
        resid = np.linalg.norm(W[:, base] @ B - W[:, dep]) / max(np.linalg.norm(W[:, dep]), 1.0)
        if resid > 1e-8:
            raise IdentificationError(f"base parameters: dependent columns not reproduced (residual {resid:.2e})")
        B[np.abs(B) < _COEF_ZERO] = 0.0
        B = np.round(B, 12)  # the regrouping coefficients are geometric: strip solver round-off
        K[:, dep] = B
    names = [base_name(std_names[k], np.count_nonzero(K[i]) > 1) for i, k in enumerate(base)]
    return BaseParameters(std_names, std_units, base, K, tuple(names))

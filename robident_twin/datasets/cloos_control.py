"""The CLOOS QRC 350 control errors of ICMA 2020 Sec. IV-C (Table VII): the reference error
``deg_e`` (samples x 6 joints, degrees) of the model-based feed-forward controller without a model,
with models A and B and with the process model, for process 1 and 2
(``Experimental_Validation/Controll_Error/Process_<p>/<model>.mat``, sampled at 500 Hz).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hal.files.cloos_icma2020 import N_JOINTS, DatasetError, _array, _load_mat, _top, data_root

CONTROL_DIR = Path("Experimental_Validation") / "Controll_Error"  # sic: the dataset's spelling
#: column name of Table VII -> file stem
MODELS = {"none": "Without_Model", "model_A": "Model_A", "model_B": "Model_B", "process": "Process_Model"}
PROCESSES = (1, 2)

#: ICMA 2020 Table VII (process 1): RMS reference error per joint (deg), as printed (4 decimals)
PAPER_TABLE_VII_DEG = {
    "none": (0.0039, 0.0041, 0.0070, 0.0200, 0.0099, 0.0162),
    "model_A": (0.0021, 0.0022, 0.0050, 0.0128, 0.0049, 0.0103),
    "model_B": (0.0022, 0.0022, 0.0049, 0.0127, 0.0048, 0.0096),
    "process": (0.0023, 0.0024, 0.0053, 0.0135, 0.0049, 0.0093),
}


def control_error_path(process: int, model: str, root: str | os.PathLike | None = None) -> Path:
    if process not in PROCESSES:
        raise DatasetError(f"control errors: process must be one of {PROCESSES}, got {process!r}")
    if model not in MODELS:
        raise DatasetError(f"control errors: model must be one of {list(MODELS)}, got {model!r}")
    return data_root(root) / CONTROL_DIR / f"Process_{process}" / f"{MODELS[model]}.mat"


def load_control_error(process: int, model: str, root: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(t_s (N,), deg_e (N, 6)) of one control-error file."""
    path = control_error_path(process, model, root)
    mat = _load_mat(path)
    e = _array(path, "deg_e", _top(path, mat, "deg_e"), None)
    t = np.asarray(_top(path, mat, "time_vec_save"), dtype=float).ravel()
    if t.shape[0] != e.shape[0]:
        raise DatasetError(f"{path}: field 'time_vec_save': {t.shape[0]} samples, 'deg_e' has {e.shape[0]}")
    return t, e


def rms_table_deg(process: int, root: str | os.PathLike | None = None) -> dict[str, np.ndarray]:
    """Table VII from the files: RMS of ``deg_e`` per joint (deg) for every model of a process."""
    out = {}
    for model in MODELS:
        _, e = load_control_error(process, model, root)
        out[model] = np.sqrt(np.mean(e**2, axis=0))
    return out


def format_table_vii(rms: dict[str, np.ndarray], paper: dict | None = None) -> str:
    """Rows per joint: the RMS of each model (4 decimals, as printed) and, if given, the paper's."""
    head = ["joint"] + [f"{m}" for m in rms] + ([f"paper {m}" for m in paper] if paper else [])
    rows = [head]
    for j in range(N_JOINTS):
        rows.append([f"{j + 1}"] + [f"{rms[m][j]:.4f}" for m in rms] + ([f"{paper[m][j]:.4f}" for m in paper]
                                                                         if paper else []))
    rows.append(["mean ratio to none"] + [f"{np.mean(rms[m] / rms['none']):.3f}" for m in rms]
                + ([f"{np.mean(np.array(paper[m]) / np.array(paper['none'])):.3f}" for m in paper] if paper else []))
    w = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w[i]) for i, c in enumerate(r)) for r in rows)

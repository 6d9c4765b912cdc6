"""robident_twin.validation.periodogram.band_rms_periodogram: per-band RMS from the one-sided periodogram."""
from __future__ import annotations

import numpy as np

from robident_twin.validation.periodogram import band_rms_periodogram


def test_a_sine_puts_its_rms_in_its_band_and_bands_add_up_to_the_variance():
    rate, n = 500.0, 5000  # 10 s: 0.1 Hz bins
    t = np.arange(n) / rate
    x = np.column_stack([3.0 * np.sin(2 * np.pi * 7.0 * t + 0.4) + 1.5,  # an offset, removed
                         np.random.default_rng(0).standard_normal(n)])
    bands = ((0, 5), (5, 10), (10, 250.1))  # the last one includes the Nyquist line (250 Hz)
    b = band_rms_periodogram(x, rate, bands)
    assert b.shape == (3, 2)
    np.testing.assert_allclose(b[:, 0], [0.0, 3.0 / np.sqrt(2), 0.0], atol=1e-9)
    # Parseval: the bands covering 0 Hz to Nyquist hold the whole variance (the Nyquist line counted once)
    np.testing.assert_allclose(np.sum(b ** 2, axis=0), np.var(x, axis=0), rtol=1e-12)

"""The gear transmission error of hal/sim/effects.py (issue 15): its drive torque is the inertial
reaction of a transmission whose ratio is 1 + e'(theta), checked against a finite-difference
derivation of the exact one, and the calibration scan recovers a known error from a torque record."""
import numpy as np

from hal.sim.effects import TransmissionErrorParams, transmission_error_columns, transmission_error_torque_Nm


def _trajectory(n=4001, dt=1e-3):
    t = np.arange(n) * dt
    th = 0.8 * np.sin(2 * np.pi * 0.5 * t) + 0.3 * np.sin(2 * np.pi * 1.3 * t)
    dth = 0.8 * np.pi * np.cos(2 * np.pi * 0.5 * t) + 0.78 * np.pi * np.cos(2 * np.pi * 1.3 * t)
    ddth = -0.8 * np.pi ** 2 * np.sin(2 * np.pi * 0.5 * t) - 0.3 * (2.6 * np.pi) ** 2 * np.sin(2 * np.pi * 1.3 * t)
    return t, th, dth, ddth


def test_torque_is_the_inertial_reaction_of_the_position_dependent_ratio():
    """Exact: the drive carries an inertia J through y = theta + e(theta); virtual work gives the drive
    torque J (1 + e') d2y/dt2 and the error's share is that minus J ddtheta. Finite differences of
    y(t) against the function's leading-order J (e'' dtheta^2 + 2 e' ddtheta); one flank only
    (positive velocity: the blend is 1) so the comparison holds sample by sample."""
    t, th, dth, ddth = _trajectory(n=40001, dt=1e-5)  # fine steps: the line is at k dtheta ~ 400 Hz
    th, dth = th + 6.0 * t, dth + 6.0  # always moving forward
    a, k, phi, J = 4e-6, 46.8, 0.7, 35.0
    n = t.size
    p = TransmissionErrorParams(np.full((n, 1), k), np.tile([[[a, 3 * a]]], (n, 1, 1)),
                                np.tile([[[phi, -1.0]]], (n, 1, 1)), 1e-3)
    tau = transmission_error_torque_Nm(p, th, dth, ddth, np.full(n, J))
    w = 2 * np.pi * k
    y = th + a * np.sin(w * th + phi)
    dt = t[1] - t[0]
    ddy = np.gradient(np.gradient(y, dt), dt)
    exact = J * (1 + a * w * np.cos(w * th + phi)) * ddy - J * ddth
    inner = slice(10, -10)
    scale = np.max(np.abs(exact[inner]))
    assert scale > 1.0  # a real effect: tens of Nm at these speeds
    np.testing.assert_allclose(tau[inner], exact[inner], atol=0.01 * scale)
    # the calibration basis gives the same torque: coefficients a cos(phi), a sin(phi)
    G = transmission_error_columns(k, th, dth, ddth, J)
    np.testing.assert_allclose(G @ [a * np.cos(phi), a * np.sin(phi)], tau, rtol=1e-9, atol=1e-9 * scale)


def test_flanks_switch_with_the_direction_of_motion():
    p = TransmissionErrorParams(np.array([[30.0]]), np.array([[[1e-5, 0.0]]]), np.zeros((1, 1, 2)), 1e-3)
    th, acc = np.array([0.01]), np.array([0.0])
    assert abs(transmission_error_torque_Nm(p, th, np.array([1.0]), acc, [10.0])[0]) > 1.0
    assert abs(transmission_error_torque_Nm(p, th, np.array([-1.0]), acc, [10.0])[0]) < 1e-9


def test_calibration_scan_recovers_a_known_error():
    """A flank-wise error at 52.3 cycles/rad and a weaker one at 71.1, plus white noise, on the
    real-like excitation: the scan finds both lines and their flank amplitudes and phases."""
    from robident_twin.validation.twin_vs_real import te_params, transmission_error_lines

    t, th, dth, ddth = _trajectory()
    J = 30.0 + 5.0 * np.cos(th)
    true = TransmissionErrorParams(np.array([[52.3, 71.1]]), np.array([[[5e-6, 3e-6], [2e-6, 1e-6]]]),
                                   np.array([[[0.4, -2.0], [1.0, 2.5]]]), 1e-6)
    n = t.size
    many = TransmissionErrorParams(np.tile(true.cycles_per_rad, (n, 1)), np.tile(true.amplitude_rad, (n, 1, 1)),
                                   np.tile(true.phase_rad, (n, 1, 1)), true.blend_velocity_rad_s)
    tau = transmission_error_torque_Nm(many, th, dth, ddth, J)
    rng = np.random.default_rng(0)
    r = tau + 0.2 * np.std(tau) * rng.standard_normal(tau.size)
    cyc, coef = transmission_error_lines(th[:, None], dth[:, None], ddth[:, None], J[:, None], r[:, None],
                                         n_lines=2, k_min=40.0, k_max=80.0, step=0.05)
    np.testing.assert_allclose(cyc[0], [52.3, 71.1], atol=0.051)
    est = te_params(cyc, coef)
    np.testing.assert_allclose(est.amplitude_rad, true.amplitude_rad, rtol=0.1)
    d = np.angle(np.exp(1j * (est.phase_rad - true.phase_rad)))
    assert np.all(np.abs(d) < 0.15), d

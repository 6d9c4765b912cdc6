"""An emulated Sunrise controller with FRI serving the MuJoCo twin (see
:mod:`hal.emulators.common` for the cycle loop, sessions, faults and the stop on missed answers).

Session states on the wire: IDLE (no session, or stopped after communication loss),
MONITORING_WAIT (waiting for good answers), MONITORING_READY, COMMANDING_WAIT (command mode,
waiting for the client's commandData), COMMANDING_ACTIVE. The emulator sends every cycle and
expects an answer to every ``receive_multiplier``-th message (sequenceCounter divisible by it);
a command is held until the next one. measuredJointPosition / measuredTorque are the twin's
measured position and joint-torque sensor, commandedTorque the drive torque the twin applies,
externalTorque zero, ipoData.jointPosition the position the controller commands this cycle.
"""
from __future__ import annotations

import numpy as np

from ..real.sunrise_fri import (
    COMMANDING_ACTIVE,
    COMMANDING_WAIT,
    IDLE,
    MONITORING_ID,
    MONITORING_READY,
    MONITORING_WAIT,
    Monitoring,
    decode_command,
    encode_monitoring,
    encode_varint,
)
from .common import ControllerEmulator

_STATES = {"idle": IDLE, "wait": MONITORING_WAIT, "ready": MONITORING_READY, "command_wait": COMMANDING_WAIT,
           "commanding": COMMANDING_ACTIVE, "stopped": IDLE}


class SunriseFriEmulator(ControllerEmulator):
    seq_bits = 32
    name = "sunrise_fri"

    def __init__(self, stepper, client_address, receive_multiplier: int = 1, **kw):
        self.receive_multiplier = max(1, int(receive_multiplier))
        super().__init__(stepper, client_address, **kw)

    def _wants_reply(self, seq: int) -> bool:
        return seq % self.receive_multiplier == 0

    def _encode(self, res, seq, refl, q_cmd, state) -> bytes:
        t_ns = int(round(self.status.cycles * self.stepper.dt_s * 1e9))
        tau = res.tau_joint_Nm if res.tau_joint_Nm is not None else res.tau_motor_Nm
        m = Monitoring(sequence_counter=seq, reflected_sequence_counter=refl,
                       number_of_joints=self.stepper.spec.n_joints, measured_joint_position=res.q_meas_rad,
                       measured_torque=tau, commanded_torque=res.tau_motor_true_Nm,
                       external_torque=np.zeros_like(tau), timestamp_sec=t_ns // 10**9,
                       timestamp_nanosec=t_ns % 10**9, session_state=_STATES[state], quality=self.quality,
                       send_period_ms=max(1, int(round(self.stepper.dt_s * 1000))),
                       receive_multiplier=self.receive_multiplier, ipo_joint_position=q_cmd,
                       client_command_mode=1 if state in ("command_wait", "commanding") else 0)
        return encode_monitoring(m)

    def _decode_reply(self, data: bytes):
        c = decode_command(data)
        if c.joint_position is not None and (c.joint_position.shape != (self.stepper.spec.n_joints,)
                                             or not np.all(np.isfinite(c.joint_position))):
            raise ValueError("bad jointPosition")
        return c.reflected_sequence_counter, c.joint_position

    def _wrong_id(self, data: bytes) -> bytes:
        return data.replace(encode_varint(MONITORING_ID), encode_varint(MONITORING_ID + 1), 1)


def start_sunrise_emulator(spec, client_address, noise=None, seed: int = 0, control_rate_hz: float = 1000.0,
                           controller=None, **kw) -> SunriseFriEmulator:
    """A running emulator serving a fresh twin of ``spec`` to ``client_address``."""
    from ..sim.mujoco_backend import ControllerConfig
    from ..sim.stepper import TwinStepper

    stepper = TwinStepper(spec, noise, seed=seed, control_rate_hz=control_rate_hz,
                          controller=controller or ControllerConfig())
    return SunriseFriEmulator(stepper, client_address, **kw)

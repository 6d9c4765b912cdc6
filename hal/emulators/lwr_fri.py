"""An emulated KRC2lr with FRI serving the MuJoCo twin (see :mod:`hal.emulators.common` for
the cycle loop, sessions, faults and the stop on missed answers).

Wire values: interface state MON while waiting / ready / waiting for commands, CMD while
commanding, OFF when stopped; quality from the answers missed over the last 100 cycles
(0 missed PERFECT, <= 2 OK, <= 10 UNACCEPTABLE, else BAD); msrJntPos and msrJntTrq are the
twin's measured position and joint-torque sensor (float32), cmdJntPos the position the
controller commands in this cycle (the program's reference in monitor mode, the last applied
command in command mode). Cartesian data, Jacobian, mass matrix and gravity are not
modelled (zeros). A command packet is applied only with cmdFlags & 0x1 (joint position).
"""
from __future__ import annotations

from ..real.lwr_fri import MSR_ID, STATE_CMD, STATE_MON, STATE_OFF, decode_cmd_lean, encode_msr_lean
from .common import ControllerEmulator

_STATES = {"idle": STATE_OFF, "wait": STATE_MON, "ready": STATE_MON, "command_wait": STATE_MON,
           "commanding": STATE_CMD, "stopped": STATE_OFF}


class LwrFriEmulator(ControllerEmulator):
    seq_bits = 16
    name = "lwr_fri"

    def _encode(self, res, seq, refl, q_cmd, state) -> bytes:
        dt = self.stepper.dt_s
        st = self.status
        miss_rate = sum(self._recent) / max(1, len(self._recent))
        tau = res.tau_joint_Nm if res.tau_joint_Nm is not None else res.tau_motor_Nm
        return encode_msr_lean(seq, refl, int(round(st.cycles * dt * 1000)), _STATES[state], self.quality, dt,
                               1.0 - miss_rate, miss_rate, st.missed_replies,
                               0 if state in ("idle", "stopped") else 0x7F, res.q_meas_rad, q_cmd, tau)

    def _decode_reply(self, data: bytes):
        return decode_cmd_lean(data)

    def _wrong_id(self, data: bytes) -> bytes:
        b = bytearray(data)
        b[6:8] = (MSR_ID + 1).to_bytes(2, "little")
        return bytes(b)


def start_lwr_emulator(spec, client_address, noise=None, seed: int = 0, control_rate_hz: float = 1000.0,
                       controller=None, **kw) -> LwrFriEmulator:
    """A running emulator serving a fresh twin of ``spec`` to ``client_address``."""
    from ..sim.mujoco_backend import ControllerConfig
    from ..sim.stepper import TwinStepper

    stepper = TwinStepper(spec, noise, seed=seed, control_rate_hz=control_rate_hz,
                          controller=controller or ControllerConfig())
    return LwrFriEmulator(stepper, client_address, **kw)



"""The first result's speed: the twin's acquisition against a raw ``mj_step``, and the default run.

    python benchmarks/bench_first_result.py [--periods 1] [--repeat 2] [--no-run] [--reference]
        [--robot iiwa14]

1. The MuJoCo twin's single-run acquisition (the robot's stored excitation design, the iiwa 14's
   by default (``--robot``), ideal and realistic twin, ``hal.sim.fastloop``) against a raw ``mujoco.mj_step(m, d, nstep)`` of
   the same MjModel (same integrator, same time step, the realistic twin's elastic model with
   its substeps) for the same number of engine steps, no callback. Both in CPU time (the
   machine is shared; CPU time is the proxy for the idle wall time), best of ``--repeat``,
   measured alternately so that a change of load hits both. Printed: us per control period,
   and the ratio twin / raw (the acceptance of issue 18: <= 3), and which passive-force callback
   ran: the compiled one (``hal/sim/native.py``) or numpy's (``ROBIDENT_NATIVE=0``, or no compiler);
   each for the fast loop's control periods in C (``hal/sim/native_loop.py``, the default where it
   applies; "not used" where it does not) and in Python (its reference), measured alternately.
2. The default run (``robident-twin``, realistic twin, ``robot=`` the ``--robot``) as a user starts it, in a
   pseudo-terminal (so the progress bar is drawn), twice: with an empty user cache (a first
   run on a fresh machine: base parameters computed, the project's bytecode cached as Python does
   on a user's machine: ``PYTHONDONTWRITEBYTECODE`` is dropped) and warm. For each: time to the first
   output on stderr (the first progress line), wall time, CPU time (user + sys of the child
   and its forked children), the load average, and the stage breakdown (``summary.json``
   ``timings_s``, the report's time from the console). Then the stages' CPU times in-process.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_best(fn, repeat: int) -> float:
    from _timing import best_of  # benchmarks/ is on sys.path when run as a script

    return best_of(fn, repeat, clock=time.process_time)


def acquisition_ratio(twin_name: str, periods: int, repeat: int, reference_loop: bool = False,
                      robot: str = "iiwa14") -> None:
    import mujoco

    from hal.factory import make_robot
    from hal.sim import effects as fx
    from hal.sim import native_loop
    from hal.sim.playback import plan_run
    from robident_twin.design.stored import reference, resolve_design
    from robident_twin.model.robot import load_robot
    from robident_twin.paths import CONF_DIR

    spec = load_robot(robot)
    traj = resolve_design(str(CONF_DIR / "excitation" / f"{robot}_default.yaml"), spec)
    tw = {"name": "realistic", "effects": list(fx.EFFECTS)} if twin_name == "realistic" else {"name": "ideal"}

    def twin():
        robot = make_robot(spec, {"name": "mujoco"}, None, seed=0, twin_cfg=tw)
        robot.reference_loop = reference_loop  # True: the per-cycle reference code (before the fast loop)
        return robot

    probe = twin()
    from hal.sim.fastloop import lean_passive

    lean = None if reference_loop else lean_passive(probe)
    callback = ("reference loop's" if reference_loop else "numpy" if lean is None or lean.native is None
                else "compiled")
    ref = reference(traj, probe.info.control_rate_hz)
    q0, v0 = probe.state()
    plan = plan_run(probe.info, "mujoco", ref, q0, v0, periods, 0)
    n_ctrl = plan.reference.n_samples
    n_steps = n_ctrl * probe.substeps
    m = probe.model
    # the fast loop's control periods in C (hal/sim/native_loop.py) and in Python, alternately with the raw steps
    loops = [("reference", None)] if reference_loop else [("compiled", True), ("Python", False)]
    best = {name: float("inf") for name, _ in loops}
    best_raw = float("inf")
    chunks = []
    real_run = native_loop.CompiledLoop.run

    def counted(self, k0, k1):
        chunks.append(k1 - k0)
        return real_run(self, k0, k1)

    native_loop.CompiledLoop.run = counted
    try:
        for _ in range(repeat):
            for name, use in loops:
                if use is not None:
                    native_loop.USE = use
                r = twin()  # a fresh twin per run: the same run each time
                done = len(chunks)
                best[name] = min(best[name], cpu_best(lambda: r.run(ref, periods=periods), 1))
                if use and len(chunks) == done:
                    best[name] = float("nan")  # the C loop did not run (see the log line why)
            d = mujoco.MjData(m)
            d.qpos[:] = probe.data.qpos
            d.act[:] = probe.data.act
            mujoco.set_mjcb_passive(None)
            best_raw = min(best_raw, cpu_best(lambda: mujoco.mj_step(m, d, nstep=n_steps), 1))
    finally:
        native_loop.USE = True
        native_loop.CompiledLoop.run = real_run
    timed = "; ".join(f"{name} loop not used for this twin (the Python loop ran)" if t != t else
                      f"{name} loop {1e6 * t / n_ctrl:.1f} us/period, ratio {t / best_raw:.2f}"
                      for name, t in best.items())
    print(f"{robot} {twin_name:9s} twin: {n_ctrl} control periods x {probe.substeps} engine step(s) "
          f"({m.nv} dofs, {mujoco.mjtIntegrator(m.opt.integrator).name}, h = {m.opt.timestep:g} s): {timed}; "
          f"raw mj_step {1e6 * best_raw / n_ctrl:.1f} us/period ({best_raw:.2f} s CPU) "
          f"({callback} passive callback; load average {os.getloadavg()[0]:.2f})")


def _cpu_s(pid: int) -> float | None:
    """user + sys CPU seconds of a running process (Linux /proc), None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def default_run(cache: Path | None = None, label: str = "", robot: str = "iiwa14") -> None:
    """The default run in a pseudo-terminal; ``cache``: the user cache folder it uses
    (``ROBIDENT_CACHE``; an empty folder is a first run on a fresh machine)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    out_dir = Path(tempfile.mkdtemp(prefix="bench_first_result_"))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("CI", None)
    # as on a user's machine: Python caches the project's bytecode (__pycache__, git-ignored) after
    # its first run; a sandbox's PYTHONDONTWRITEBYTECODE=1 would compile ~60 modules on every run
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache is not None:
        env["ROBIDENT_CACHE"] = str(cache)
    load0 = os.getloadavg()[0]
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a terminal's size
    t0 = time.perf_counter()
    ru0 = os.times()
    extra = [] if robot == "iiwa14" else [f"robot={robot}"]
    proc = subprocess.Popen([sys.executable, "-m", "robident_twin.cli", *extra, f"hydra.run.dir={out_dir}"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    first = first_cpu = None
    while True:  # drain the terminal (stderr); the first byte is the first progress line
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                chunk = b""
            if chunk and first is None:
                first = time.perf_counter() - t0
                first_cpu = _cpu_s(proc.pid)
            if not chunk and proc.poll() is not None:
                break
        elif proc.poll() is not None:
            break
    stdout = proc.stdout.read()
    proc.wait()
    wall = time.perf_counter() - t0
    ru1 = os.times()
    os.close(master)
    cpu = (ru1.children_user - ru0.children_user) + (ru1.children_system - ru0.children_system)
    if proc.returncode != 0:
        raise SystemExit(f"the default run failed (exit {proc.returncode}):\n{stdout[-2000:]}")
    summary = json.loads((out_dir / "summary.json").read_text())
    print(f"default run{label}: first progress line after {first if first is None else round(first, 2)} s wall, "
          f"{first_cpu if first_cpu is None else round(first_cpu, 2)} s CPU; the run: wall {wall:.2f} s, "
          f"CPU (user + sys, its forked children included) {cpu:.2f} s; load average {load0:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    print("  stage wall times on the main process (forked children beside them: the validation run with its "
          "processing and regressor during the excitation run and its fit, the report's excitation section, "
          "half of its figures with their PNG files; 'report' counts from the end of identify: summary, table, "
          "figures, page):")
    for k, v in summary["timings_s"].items():
        print(f"  {k:<16} {v:7.2f} s")
    m = re.search(r"report: .*\(([\d.]+) s\)", stdout)
    if m:
        print(f"  {'report':<16} {float(m.group(1)):7.2f} s")
    staged = sum(summary["timings_s"].values()) + (float(m.group(1)) if m else 0.0)  # all on the main process
    print(f"  {'rest (imports, Hydra, process start and end)':<16} {wall - staged:7.2f} s "
          f"(wall minus the stages on the main process)")


def default_run_cpu_stages(robot: str = "iiwa14") -> None:
    """The default run in this process (as the CLI runs it: identify, plots, summary, report),
    each stage's CPU time: the pipeline's stage timer reads the process CPU clock here."""
    import contextlib
    import io
    import types

    from hydra import compose, initialize_config_dir

    import robident_twin.pipeline as pipeline
    from robident_twin.cli import run_identify
    from robident_twin.paths import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=[] if robot == "iiwa14" else [f"robot={robot}"])
    pipeline.time = types.SimpleNamespace(perf_counter=time.process_time)  # stage timings in CPU seconds
    out = Path(tempfile.mkdtemp(prefix="bench_first_result_cpu_"))

    def children() -> float:  # the finished (forked) children
        t = os.times()
        return t.children_user + t.children_system

    t0, c0 = time.process_time(), children()
    with contextlib.redirect_stdout(io.StringIO()):
        summary = run_identify(cfg, out)
    main_cpu, child_cpu = time.process_time() - t0, children() - c0
    total = main_cpu + child_cpu
    stages = summary["timings_s"]
    print(f"default run in-process (after imports, warm cache): {total:.2f} s CPU = main process {main_cpu:.2f} s "
          f"(on an idle 2-core machine about the wall after imports: the children run on the other core) + forked "
          f"children {child_cpu:.2f} s; each stage in its own process's CPU seconds:")
    for k, v in stages.items():
        print(f"  {k:<16} {v:7.2f} s CPU ({100 * v / total:4.1f} %)")
    rest = total - sum(stages.values())
    print(f"  {'plots + report':<16} {rest:7.2f} s CPU ({100 * rest / total:4.1f} %; both processes)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--periods", type=int, default=1, help="recorded periods of the acquisition ratio run")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--no-run", action="store_true", help="skip the default run")
    ap.add_argument("--reference", action="store_true", help="also time the per-cycle reference loop")
    ap.add_argument("--robot", default="iiwa14", help="the robot (conf/robot/<name>.yaml; its <name>_default design)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    for name in ("ideal", "realistic"):
        acquisition_ratio(name, args.periods, args.repeat, robot=args.robot)
        if args.reference:
            acquisition_ratio(name, args.periods, args.repeat, reference_loop=True, robot=args.robot)
    if not args.no_run:
        fresh = Path(tempfile.mkdtemp(prefix="bench_first_result_cache_"))
        default_run(fresh, " (first run, empty user cache)", args.robot)
        default_run(fresh, " (second run, warm cache)", args.robot)
        default_run_cpu_stages(args.robot)


if __name__ == "__main__":
    main()

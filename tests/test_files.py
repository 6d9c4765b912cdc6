"""Recorded files in and out of the HAL (hal/files/): round trips, the CLOOS .mat files, a KRC4
DIAdem trace written here, refusal of bad files (file, column, row named) and identification
through the ``file`` backend against direct identification on the twin."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hal.files import FileFormatError, load_recording, save_recording, save_trajectory, summary
from hal.files.csv_io import read_trajectory_csv
from hal.files.krl import read_krl_points
from hal.files.ros_io import read_recording_mcap, read_trajectory_mcap
from hal.protocol import JointTrajectory, Recording


def same_channels(a: Recording, b: Recording, t_atol=0.0):
    np.testing.assert_allclose(b.t_s, a.t_s, rtol=0, atol=t_atol)
    for name in ("q_rad", "tau_motor_Nm", "tau_joint_Nm", "q_cmd_rad"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert np.array_equal(x, y), name  # bit for bit
    assert (b.period_samples, b.n_periods) == (a.period_samples, a.n_periods)
    assert b.sample_rate_hz == a.sample_rate_hz


@pytest.fixture
def rec():
    rng = np.random.default_rng(1)
    N, n = 300, 3
    return Recording(t_s=np.arange(N) / 100.0, q_rad=rng.normal(size=(N, n)), tau_motor_Nm=rng.normal(size=(N, n)) * 50,
                     tau_joint_Nm=rng.normal(size=(N, n)), q_cmd_rad=rng.normal(size=(N, n)), sample_rate_hz=100.0,
                     period_samples=100, n_periods=3, metadata={"source": "test", "robot": "x", "noise": {"s": 0.1}})


@pytest.fixture
def traj():
    t = np.arange(200) / 100.0
    w = 2 * np.pi / 2.0
    q = np.column_stack([np.sin(w * t), 0.5 * np.cos(2 * w * t), 0.1 + 0.2 * np.sin(3 * w * t)])
    dq = np.column_stack([w * np.cos(w * t), -w * np.sin(2 * w * t), 0.6 * w * np.cos(3 * w * t)])
    ddq = np.column_stack([-w**2 * np.sin(w * t), -2 * w**2 * np.cos(2 * w * t), -1.8 * w**2 * np.sin(3 * w * t)])
    return JointTrajectory(t, q, dq, ddq, period_s=2.0)


# ---------------------------------------------------------------- round trips
@pytest.mark.parametrize("ext", ["csv", "npz", "mat"])
def test_recording_round_trip_is_exact(tmp_path, rec, ext):
    p = save_recording(rec, tmp_path / f"r.{ext}")
    back = load_recording(p)
    same_channels(rec, back)
    assert back.metadata["source"] == str(p) and back.metadata["units"]["q"] == "rad"


def test_csv_keeps_metadata_and_a_valid_mask(tmp_path, rec):
    rec.metadata["valid"] = np.arange(300) % 7 != 0  # the metadata copy when Recording has no valid field
    back = load_recording(save_recording(rec, tmp_path / "r.csv"))
    assert back.metadata["robot"] == "x" and back.metadata["noise"] == {"s": 0.1}
    v = getattr(back, "valid", None)
    v = back.metadata["valid"] if v is None else v
    assert np.array_equal(v, np.arange(300) % 7 != 0)


def test_csv_degrees_milliseconds_and_a_units_row(tmp_path):
    q_deg = np.array([[10.0, -20.0], [11.0, -21.0], [12.5, -22.0]])
    rows = "\n".join(f"{k * 4},{q[0]},{q[1]},{k},{-k},{k * 1000}" for k, q in enumerate(q_deg))
    p = tmp_path / "units_row.csv"
    p.write_text("t,q1,q2,tau_motor1,tau_motor2,tau_joint1\nms,deg,deg,Nm,Nm,mNm\n" + rows + "\n")
    with pytest.raises(FileFormatError, match=r"missing column tau_joint2_Nm"):
        load_recording(p)
    p.write_text("t,q1,q2,tau_motor1,tau_motor2,current1,current2\nms,deg,deg,Nm,Nm,A,mA\n"
                 + "\n".join(r + ",5" for r in rows.split("\n")) + "\n")
    r = load_recording(p)
    np.testing.assert_allclose(r.q_rad, np.radians(q_deg), rtol=1e-15)
    np.testing.assert_allclose(r.t_s, [0, 0.004, 0.008], rtol=1e-15)
    assert r.sample_rate_hz == pytest.approx(250.0)
    assert r.metadata["q_cmd_recorded"] is False and np.allclose(r.metadata["current_A"][:, 1], 0.005)


def test_joint_torque_only_csv(tmp_path, rec):
    """Joint-torque columns alone (an LWR4+ over FRI): the motor torque is the protocol's
    placeholder and motor-torque models are refused; the file round-trips as such."""
    from hal.files.common import placeholder_supported
    from robident_twin.errors import RecordingError

    p = csv_file(tmp_path, "t_s,q1_rad,q2_rad,tau_joint1_Nm,tau_joint2_Nm", GOOD)
    if not placeholder_supported():
        with pytest.raises(FileFormatError, match=r"bad\.csv: missing column tau_motor1_Nm"):
            load_recording(p)
        return
    r = load_recording(p)
    assert r.metadata["motor_torque_available"] is False and np.array_equal(r.torque("joint_torque"), [[1, 2]] * 3)
    with pytest.raises(RecordingError, match="use joint_torque"):
        r.torque("motor_torque")
    back = load_recording(save_recording(r, tmp_path / "again.csv"))
    assert "tau_motor1_Nm" not in back.metadata["columns"] and back.metadata["motor_torque_available"] is False


def test_trajectory_csv_round_trip(tmp_path, traj):
    back = read_trajectory_csv(save_trajectory(traj, tmp_path / "t.csv"))
    for name in ("t_s", "q_rad", "dq_rad_s", "ddq_rad_s2"):
        assert np.array_equal(getattr(back, name), getattr(traj, name))
    assert back.period_s == 2.0


def test_mcap_recording_round_trip(tmp_path, rec):
    p = save_recording(rec, tmp_path / "r.mcap", joint_names=["a1", "a2", "a3"])
    back = load_recording(p)
    same_channels(rec, back, t_atol=1e-9)  # values exact (float64 in CDR), time to 1 ns
    assert back.metadata["joint_names"] == ["a1", "a2", "a3"] and back.metadata["robot"] == "x"
    # joints picked by name: another order permutes the columns
    perm = read_recording_mcap(p, joint_names=["a3", "a1", "a2"])
    assert np.array_equal(perm.q_rad, rec.q_rad[:, [2, 0, 1]])
    # the same messages in a rosbag2 folder written by rosbags (storage MCAP) read the same
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    JS, H, T = ts.types["sensor_msgs/msg/JointState"], ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    bag = tmp_path / "bag"
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        c = w.add_connection("/robot/joint_states", JS.__msgtype__, typestore=ts)
        for k in range(rec.t_s.size):
            ns = 1_700_000_000_000_000_000 + k * 10_000_000
            m = JS(header=H(stamp=T(sec=ns // 10**9, nanosec=ns % 10**9), frame_id=""), name=["a2", "a1", "a3"],
                   position=rec.q_rad[k, [1, 0, 2]], velocity=np.zeros(0), effort=rec.tau_motor_Nm[k, [1, 0, 2]])
            w.write(c, ns, ts.serialize_cdr(m, JS.__msgtype__))
    r2 = load_recording(bag, topic="/robot/joint_states", joint_names=["a1", "a2", "a3"])
    assert np.array_equal(r2.q_rad, rec.q_rad) and np.array_equal(r2.tau_motor_Nm, rec.tau_motor_Nm)
    np.testing.assert_allclose(r2.t_s, rec.t_s, atol=1e-9)
    assert r2.tau_joint_Nm is None and r2.metadata["q_cmd_recorded"] is False


def test_mcap_trajectory_round_trip(tmp_path, traj):
    back = read_trajectory_mcap(save_trajectory(traj, tmp_path / "t.mcap", joint_names=["a", "b", "c"]))
    for name in ("q_rad", "dq_rad_s", "ddq_rad_s2"):
        assert np.array_equal(getattr(back, name), getattr(traj, name))
    np.testing.assert_allclose(back.t_s, traj.t_s, atol=1e-9)
    assert back.period_s == 2.0


def test_krl_point_list(tmp_path, traj):
    src = save_trajectory(traj, tmp_path / "excite.src", point_rate_hz=10.0, periods=3)
    text = src.read_text()
    t, q, dq = read_krl_points(src, 3)
    assert t.size == 21 and t[-1] == 2.0  # 20 points per period + the closing start point
    np.testing.assert_allclose(q[:-1], traj.q_rad[::10], rtol=0, atol=np.radians(0.5e-6) + 1e-12)
    np.testing.assert_allclose(q[-1], traj.q_rad[0], atol=np.radians(0.5e-6) + 1e-12)
    np.testing.assert_allclose(dq[:-1], traj.dq_rad_s[::10], rtol=0, atol=np.radians(0.5e-6) + 1e-12)
    assert text.count("SPTP XP[") == 21 and "FOR I=1 TO 3" in text and "TIME_BLOCK END = 2.000000" in text
    parts = [float(x) for x in re.findall(r"TIME_BLOCK PART = ([0-9.]+)", text)]
    assert len(parts) == 20 and sum(parts) == pytest.approx(2.0)
    assert "DEFDAT excite PUBLIC" in (tmp_path / "excite.dat").read_text()


# ---------------------------------------------------------------- CLOOS .mat (shared data)


def test_cloos_mat_files_read(cloos_data_root, tmp_path):
    from robident_twin.datasets import cloos_icma2020 as ds

    for name, (rel, kind) in ds.FILES.items():
        r = load_recording(cloos_data_root / rel)
        ref = ds.load(name)
        assert r.n_joints == 6 and r.metadata["format"] == "cloos_icma2020"
        assert np.array_equal(r.q_rad, ref.data.q_rad) and np.array_equal(r.tau_motor_Nm, ref.data.tau_Nm)
        assert r.sample_rate_hz == ref.data.sample_rate_hz
        if name in ("A", "B", "C"):  # excitation files: 2 ms sampling, 10 s
            assert r.sample_rate_hz == pytest.approx(500.0, rel=1e-9) and r.t_s.size == 5001
        assert (r.period_samples, r.n_periods) == (r.t_s.size, 1)
    # the same file under another name is recognised by its variables
    (tmp_path / "copy.mat").write_bytes((cloos_data_root / ds.FILES["B"][0]).read_bytes())
    assert np.array_equal(load_recording(tmp_path / "copy.mat").q_rad, ds.load("B").data.q_rad)


# ---------------------------------------------------------------- KUKA KRC4 trace (DIAdem)
def write_diadem(dat: Path, channels, n: int, dt_s: float | None, time_unit="s"):
    """Our own minimal DIAdem writer: channels = [(name, unit, raw values, offset, factor)]."""
    head = ["DIAEXTENDED  {@:ENGLISH", "#BEGINGLOBALHEADER", "1,WINDOWS", "2,robident-twin test", "#ENDGLOBALHEADER"]
    if dt_s is not None:
        head += ["#BEGINCHANNELHEADER", "200,Zeit", f"202,{time_unit}", "210,IMPLIZIT", f"220,{n}", "240,0",
                 f"241,{dt_s!r}", "#ENDCHANNELHEADER"]
    for k, (name, unit, _, off, fac) in enumerate(channels):
        head += ["#BEGINCHANNELHEADER", f"200,{name}", f"202,{unit}", "210,EXPLIZIT", f"211,{dat.stem}.r64",
                 "213,BLOCK", "214,REAL64", f"220,{n}", f"221,{k + 1}", f"240,{off!r}", f"241,{fac!r}",
                 "#ENDCHANNELHEADER"]
    dat.write_text("\n".join(head) + "\n", encoding="latin-1")
    raw = np.column_stack([c[2] for c in channels]) if channels else np.zeros((n, 0))
    raw.astype("<f8").tofile(dat.with_suffix(".r64"))


@pytest.fixture
def trace(tmp_path):
    rng = np.random.default_rng(4)
    n, dt = 400, 0.004
    q_deg = rng.uniform(-90, 90, (n, 3))
    tau = rng.normal(size=(n, 3)) * 100
    cur = rng.normal(size=(n, 3)) * 5
    write_diadem(tmp_path / "run_KRCIpo.dat", [(f"Sollposition A{a + 1}", "Grad", q_deg[:, a], 0.0, 1.0)
                                               for a in range(3)], n, dt)
    for a in range(3):  # drive modules: no axis number in the names, it comes from the file name
        write_diadem(tmp_path / f"run_NextGenDrive#{a + 1}.dat",
                     [("Istposition", "Grad", (q_deg[:, a] - 1.0) / 2.0, 1.0, 2.0),  # offset + factor scaling
                      ("Istmoment", "Nm", tau[:, a], 0.0, 1.0), ("Iststrom", "A", cur[:, a], 0.0, 1.0)], n, dt)
    return tmp_path, q_deg, tau, cur, dt


def test_krc4_trace_reads_back(trace):
    d, q_deg, tau, cur, dt = trace
    r = load_recording(d / "run_NextGenDrive#2.dat")  # any file of the set reads the whole set
    assert r.metadata["format"] == "krc4_trace" and len(r.metadata["files"]) == 4
    np.testing.assert_allclose(r.q_rad, np.radians(q_deg), rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(r.q_cmd_rad, np.radians(q_deg), rtol=1e-15)
    assert np.array_equal(r.tau_motor_Nm, tau) and np.array_equal(r.metadata["current_A"], cur)
    np.testing.assert_allclose(r.t_s, np.arange(400) * dt, rtol=1e-15)
    assert r.sample_rate_hz == pytest.approx(250.0)


def test_krc4_current_only_and_no_time_channel(tmp_path):
    rng = np.random.default_rng(5)
    cur = rng.normal(size=(50, 2))
    write_diadem(tmp_path / "t.dat", [("Istposition A1", "rad", np.zeros(50), 0.0, 1.0), ("Istposition A2", "rad",
                  np.ones(50), 0.0, 1.0), ("Iststrom A1", "A", cur[:, 0], 0.0, 1.0),
                 ("Iststrom A2", "A", cur[:, 1], 0.0, 1.0)], 50, None)
    with pytest.raises(FileFormatError, match=r"t\.dat: no time channel.*sample_time_s"):
        load_recording(tmp_path / "t.dat", torque_constant_Nm_per_A=[2.0, 3.0])
    with pytest.raises(FileFormatError, match=r"Istmoment A1 missing; give torque_constant_Nm_per_A"):
        load_recording(tmp_path / "t.dat", sample_time_s=0.012)
    r = load_recording(tmp_path / "t.dat", sample_time_s=0.012, torque_constant_Nm_per_A=[2.0, 3.0])
    np.testing.assert_allclose(r.tau_motor_Nm, cur * [2.0, 3.0], rtol=1e-15)


# ---------------------------------------------------------------- bad files: file, column, row named
def csv_file(tmp_path, header, rows):
    p = tmp_path / "bad.csv"
    p.write_text(header + "\n" + "\n".join(rows) + "\n")
    return p


GOOD = ["0,0.1,0.2,1,2", "0.01,0.1,0.2,1,2", "0.02,0.1,0.2,1,2"]


@pytest.mark.parametrize("header,rows,pattern", [
    ("t_s,q1_rad,q3_rad,tau_motor1_Nm,tau_motor2_Nm", GOOD, r"bad\.csv: missing column q2_rad"),
    ("t_s,q1_rad,q2_rad,tau_motor1_Nm", [r[:-2] for r in GOOD], r"bad\.csv: missing column tau_motor2_Nm"),
    ("t_s,q1_rad,q2_mm,tau_motor1_Nm,tau_motor2_Nm", GOOD, r"bad\.csv: column q2_mm: unit 'mm' is not a unit of angle"),
    ("t_s,q1_rad,q2_rad,tau_motor1_A,tau_motor2_Nm", GOOD, r"column tau_motor1_A: unit 'A' is not a unit of torque"),
    ("t_s,q1,q2_rad,tau_motor1_Nm,tau_motor2_Nm", GOOD, r"column q1: no unit"),
    ("t_s,q1_rad,q2_rad,tau_motor1_Nm,tau_motor2_Nm", [GOOD[0], GOOD[2], GOOD[1]],
     r"bad\.csv: column t_s, line 4: time is not strictly increasing"),
    ("t_s,q1_rad,q2_rad,tau_motor1_Nm,tau_motor2_Nm", [GOOD[0], "0.01,0.1,nan,1,2", GOOD[2]],
     r"bad\.csv: column q2_rad, line 3: value is not finite"),
    ("t_s,q1_rad,q2_rad,tau_motor1_Nm,tau_motor2_Nm", [GOOD[0], GOOD[1], "0.02,0.1,0.2,inf,2"],
     r"column tau_motor1_Nm, line 4: value is not finite"),
    ("t_s,q1_rad,q2_rad,tau_motor1_Nm,tau_motor2_Nm", [GOOD[0], "0.01,0.1,0.2,1", GOOD[2]],
     r"bad\.csv: line 3: 4 fields, the header \(line 1\) has 5"),
    ("t_s,q1_rad,q2_rad,tau_motor1_Nm,tau_motor2_Nm", [GOOD[0], GOOD[1], "0.02,0.1,x,1,2"],
     r"column q2_rad, line 4: 'x' is not a number"),
])
def test_bad_csv_is_refused_with_file_column_and_row(tmp_path, header, rows, pattern):
    with pytest.raises(FileFormatError, match=pattern):
        load_recording(csv_file(tmp_path, header, rows))


def test_bad_mat_is_refused(tmp_path):
    import scipy.io

    t = np.arange(5) * 0.01
    q = np.zeros((5, 2))
    p = tmp_path / "bad.mat"
    scipy.io.savemat(p, {"t_s": t, "q_rad": q})
    with pytest.raises(FileFormatError, match=r"bad\.mat: missing variable tau_motor_Nm"):
        load_recording(p)
    scipy.io.savemat(p, {"t_s": t, "q_rad": q, "tau_motor_Nm": np.zeros((4, 2))})
    with pytest.raises(FileFormatError, match=r"bad\.mat: variable tau_motor_Nm: 4 samples.*has 5"):
        load_recording(p)
    tau = np.zeros((5, 2))
    tau[3, 1] = np.nan
    scipy.io.savemat(p, {"t_s": t, "q_rad": q, "tau_motor_Nm": tau})
    with pytest.raises(FileFormatError, match=r"bad\.mat: column tau_motor_Nm\(:, 2\), row 4: value is not finite"):
        load_recording(p)
    scipy.io.savemat(p, {"t_s": t[::-1], "q_rad": q, "tau_motor_Nm": np.zeros((5, 2))})
    with pytest.raises(FileFormatError, match=r"bad\.mat: column t_s, row 2: time is not strictly increasing"):
        load_recording(p)
    scipy.io.savemat(p, {"time": t, "pos": np.degrees(q + 1), "tau_motor_Nm": np.ones((5, 2))})
    r = load_recording(p, variables={"t_s": "time", "q_deg": "pos"})  # named variables, degrees converted
    np.testing.assert_allclose(r.q_rad, q + 1, rtol=1e-15)


def test_bad_mcap_is_refused(tmp_path, rec):
    p = save_recording(rec, tmp_path / "r.mcap")
    with pytest.raises(FileFormatError, match=r"r\.mcap: topic /robot/joint_states not found; topics are .*/joint_states"):
        load_recording(p, topic="/robot/joint_states")
    with pytest.raises(FileFormatError, match=r"r\.mcap: topic /joint_states, message 0: joint\(s\) \['elbow'\] missing"):
        load_recording(p, joint_names=["joint1", "elbow"])
    t = rec.t_s.copy()
    t[50] = t[49]
    bad = Recording(t_s=np.arange(300) / 100.0, q_rad=rec.q_rad, tau_motor_Nm=rec.tau_motor_Nm, tau_joint_Nm=None,
                    q_cmd_rad=rec.q_cmd_rad, sample_rate_hz=100.0)
    bad.t_s = t  # bypass the Recording checks: a file with a repeated stamp
    p2 = save_recording(bad, tmp_path / "dup.mcap")
    with pytest.raises(FileFormatError, match=r"dup\.mcap: topic /joint_states, message 50: header time is not strictly"):
        load_recording(p2)


def test_bad_krc4_trace_is_refused(trace):
    d, q_deg, tau, cur, dt = trace
    r64 = d / "run_NextGenDrive#2.r64"
    data = np.fromfile(r64, "<f8")
    data[:-3].tofile(r64)
    with pytest.raises(FileFormatError, match=r"run_NextGenDrive#2\.r64: 1197 float64 values.*400 samples x 3 channels"):
        load_recording(d / "run_KRCIpo.dat")
    data[3 * 7 + 1] = np.inf  # sample 7, channel 2 (Istmoment)
    data.tofile(r64)
    with pytest.raises(FileFormatError, match=r"run_NextGenDrive#2\.dat: channel 'Istmoment', sample 7: value is not finite"):
        load_recording(d / "run_KRCIpo.dat")
    write_diadem(d / "run_NextGenDrive#2.dat", [("Istposition", "mm", q_deg[:, 1], 0.0, 1.0),
                                               ("Istmoment", "Nm", tau[:, 1], 0.0, 1.0)], 400, dt)
    with pytest.raises(FileFormatError, match=r"run_NextGenDrive#2\.dat: channel 'Istposition': unit 'mm'"):
        load_recording(d / "run_KRCIpo.dat")
    (d / "run_NextGenDrive#2.dat").unlink()
    with pytest.raises(FileFormatError, match=r"channel q of axis A2 missing \(German name Istposition A2\)"):
        load_recording(d / "run_KRCIpo.dat")
    write_diadem(d / "run_NextGenDrive#2.dat", [("Istposition", "Grad", q_deg[:300, 1], 0.0, 1.0)], 300, dt)
    with pytest.raises(FileFormatError, match=r"channel 'Istposition' has 300 samples.*has 400"):
        load_recording(d / "run_KRCIpo.dat")


# ---------------------------------------------------------------- the file backend
def test_file_backend_checks_joints_period_and_command(tmp_path, rec, traj):
    from hal.files.backend import FileRobot
    from robident_twin.model.robot import load_robot

    spec = load_robot("kuka_ir361")  # 3 joints
    p = save_recording(rec, tmp_path / "r.csv")
    with pytest.raises(FileFormatError, match=r"r\.csv: recorded on robot 'x'"):
        FileRobot(spec, str(p))
    rec.metadata.pop("robot")
    p = save_recording(rec, tmp_path / "r.csv")
    robot = FileRobot(spec, str(p), check_command=False)
    assert robot.info.control_rate_hz == 100.0 and robot.info.backend == "file"
    with pytest.raises(FileFormatError, match=r"the file's period is 100 samples .* the trajectory's is 200"):
        robot.run(traj, periods=1)
    short = JointTrajectory(traj.t_s[:100], traj.q_rad[:100], traj.dq_rad_s[:100], traj.ddq_rad_s2[:100], period_s=1.0)
    with pytest.raises(FileFormatError, match=r"3 recorded period\(s\), acquisition.periods asks for 4"):
        robot.run(short, periods=4)
    out = robot.run(short, periods=2)  # the last two periods of the file
    assert out.n_periods == 2 and np.array_equal(out.q_rad, rec.q_rad[100:])
    with pytest.raises(FileFormatError, match=r"no recording was made with this reference.*r\.csv: max \|q_cmd"):
        FileRobot(spec, str(p)).run(short, periods=1)
    with pytest.raises(FileFormatError, match=r"3 joints, robot lwr4p has 7"):
        FileRobot(load_robot("lwr4p"), str(p))


@pytest.fixture(scope="module")
def twin_run(tmp_path_factory):
    """A short direct identification on the realistic MuJoCo twin (IR 361, 250 Hz, 2 periods) with its recordings."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from robident_twin.paths import CONF_DIR
    from robident_twin.pipeline import identify

    out = tmp_path_factory.mktemp("twin")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose("config", overrides=["robot=kuka_ir361", "acquisition.periods=2", "acquisition.transient_periods=0",
                                           "backend.control_rate_hz=250", "base.n_samples=100"])
    cfg = OmegaConf.to_container(cfg, resolve=True)
    return cfg, identify(cfg, out_dir=out, progress=False), out


@pytest.mark.slow
@pytest.mark.parametrize("ext", ["csv", "mcap"])
def test_identification_through_the_file_backend_equals_direct(tmp_path, twin_run, ext):
    from robident_twin.pipeline import identify

    cfg, direct, out = twin_run
    paths = []
    for which in ("excitation", "validation"):
        rec = load_recording(out / f"recording_{which}.npz")
        paths.append(str(save_recording(rec, tmp_path / f"{which}.{ext}", **(
            {"joint_names": ["A1", "A2", "A3"]} if ext == "mcap" else {}))))
    # given in the wrong order: the backend picks each file by its recorded command
    file_cfg = dict(cfg, backend={"name": "file", "path": paths[1], "validation_path": paths[0]})
    via_file = identify(file_cfg, progress=False)
    d = np.abs(via_file.estimate.beta - direct.estimate.beta)
    print(f"\n{ext}: {len(d)} base parameters, max |beta_file - beta_direct| = {d.max():.3g}, "
          f"max relative {np.max(d / np.maximum(np.abs(direct.estimate.beta), 1e-12)):.3g}")
    np.testing.assert_allclose(via_file.estimate.beta, direct.estimate.beta, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(via_file.summary["validation"]["torque_rmse_Nm"],
                               direct.summary["validation"]["torque_rmse_Nm"], rtol=1e-10)
    assert via_file.summary["backend"] == "file" and via_file.summary["n_samples"] == direct.summary["n_samples"]


# ---------------------------------------------------------------- CLI tasks
def test_cli_import_and_export_trajectory(tmp_path, rec):
    rec.metadata["q_cmd_recorded"] = True
    src = save_recording(rec, tmp_path / "in.mcap")
    exe = Path(sys.executable).parent / "robident-twin"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "robident_twin.cli"]
    run = lambda *a: subprocess.run(cmd + list(a), capture_output=True, text=True, cwd=tmp_path, timeout=300)  # noqa: E731
    p = run("task=import", f"files.input={src}", "files.output_format=npz", f"hydra.run.dir={tmp_path / 'imp'}")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "300 samples, 3 joints" in p.stdout and "3 x 100 samples" in p.stdout and "gaps:         0" in p.stdout
    same_channels(rec, load_recording(tmp_path / "imp" / "in.npz"), t_atol=1e-9)
    p = run("task=export_trajectory", "robot=kuka_ir361", "files.output_format=krl", "files.rate_hz=100",
            f"hydra.run.dir={tmp_path / 'exp'}")
    assert p.returncode == 0, p.stderr[-2000:]
    t, q, _ = read_krl_points(tmp_path / "exp" / "kuka_ir361_excitation.src", 3)
    assert t[-1] == pytest.approx(10.0) and q.shape == (201, 3)
    bad = csv_file(tmp_path, "t_s,q1_rad,q2_mm,tau_motor1_Nm,tau_motor2_Nm", GOOD)
    p = run("task=import", f"files.input={bad}", f"hydra.run.dir={tmp_path / 'bad'}")
    assert p.returncode == 2 and "column q2_mm" in p.stderr and (tmp_path / "bad" / "FAILED.txt").exists()


def test_summary_reports_gaps(rec):
    t = rec.t_s.copy()
    t[200:] += 0.5
    r = Recording(t_s=t, q_rad=rec.q_rad, tau_motor_Nm=rec.tau_motor_Nm, tau_joint_Nm=None, q_cmd_rad=rec.q_cmd_rad,
                  sample_rate_hz=100.0)
    s = summary(r)
    assert s["gaps"] == 1 and s["first_gap_sample"] == 200 and s["largest_gap_s"] == pytest.approx(0.51)


def test_import_api_validates_the_files_mapping_once(tmp_path, rec):
    """task=import reads the typed ``files`` section; a mapping given to the Python API
    (import_recording) is validated at its entry, the error naming files.<key> and the choices."""
    from robident_twin.errors import ConfigError
    from robident_twin.file_tasks import as_files, import_recording

    src = save_recording(rec, tmp_path / "in.npz")
    with pytest.raises(ConfigError, match=r"files\.output_format.*xls"):
        import_recording({"input": str(src), "output_format": "xls"}, tmp_path / "bad")
    with pytest.raises(ConfigError, match=r"files\.inptu"):
        import_recording({"inptu": str(src)}, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()  # refused before any work
    files = as_files({"input": str(src), "output_format": "csv"})
    assert as_files(files) is files
    s = import_recording(files, tmp_path / "imp")
    assert s["output"] == str(tmp_path / "imp" / "in.csv")
    same_channels(rec, load_recording(tmp_path / "imp" / "in.csv"), t_atol=1e-9)

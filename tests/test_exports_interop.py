"""Exports open unchanged in the tools people use (issue 18, Build 4): pandas reads the CSV, the
``mcap`` reader and ``rosbags`` read the MCAP, plain PyBullet and yourdfpy load the exported URDF,
with no project code between the file and the tool; files get the mode the umask gives."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from hal.files import load_recording, save_recording
from hal.files.io import save_trajectory
from hal.protocol import JointTrajectory, Recording


def _recording(robot_joints: int = 7, n: int = 50) -> Recording:
    rng = np.random.default_rng(0)
    return Recording(t_s=np.arange(n) / 100.0, q_rad=rng.standard_normal((n, robot_joints)),
                     tau_motor_Nm=rng.standard_normal((n, robot_joints)), tau_joint_Nm=None,
                     q_cmd_rad=rng.standard_normal((n, robot_joints)), sample_rate_hz=100.0,
                     period_samples=25, n_periods=2, metadata={"robot": "iiwa14", "seed": 3})


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_csv_export_is_read_by_plain_pandas(tmp_path):
    import pandas as pd

    rec = _recording()
    path = save_recording(rec, tmp_path / "r.csv")
    df = pd.read_csv(path)  # no skiprows, no comment=: the file is a plain table
    assert list(df.columns[:8]) == ["t_s", *[f"q{j}_rad" for j in range(1, 8)]]
    np.testing.assert_array_equal(df[[f"q{j}_rad" for j in range(1, 8)]].to_numpy(), rec.q_rad)  # bit for bit
    np.testing.assert_array_equal(df["t_s"].to_numpy(), rec.t_s)
    meta = json.loads((tmp_path / "r.csv.meta.json").read_text())  # the sidecar, plain JSON
    assert meta["sample_rate_hz"] == 100.0 and meta["period_samples"] == 25 and meta["n_periods"] == 2
    assert meta["metadata"]["robot"] == "iiwa14"
    back = load_recording(path)  # and our importer reads the pair back
    assert back.period_samples == 25 and back.n_periods == 2 and back.metadata["seed"] == 3


def test_old_csv_with_hash_header_is_still_imported(tmp_path):
    p = tmp_path / "old.csv"
    p.write_text("# robident-twin recording\n# sample_rate_hz: 100.0\n# period_samples: 2\n# n_periods: 2\n"
                 '# metadata: {"robot": "x"}\nt_s,q1_rad,tau_motor1_Nm\n0,0,1\n0.01,0,1\n0.02,0,1\n0.03,0,1\n')
    r = load_recording(p)
    assert r.period_samples == 2 and r.n_periods == 2 and r.metadata["robot"] == "x" and r.n_joints == 1


def test_contradicting_sidecar_and_header_are_refused(tmp_path):
    from hal.files.common import FileFormatError

    p = tmp_path / "both.csv"
    p.write_text("# sample_rate_hz: 100.0\nt_s,q1_rad,tau_motor1_Nm\n0,0,1\n0.01,0,1\n")
    (tmp_path / "both.csv.meta.json").write_text('{"sample_rate_hz": 200.0}')
    with pytest.raises(FileFormatError, match=r"both\.csv: metadata key sample_rate_hz: .*contradicts 200\.0 in "
                                              r".*both\.csv\.meta\.json"):
        load_recording(p)
    (tmp_path / "both.csv.meta.json").write_text("[1, 2]")
    with pytest.raises(FileFormatError, match=r"both\.csv\.meta\.json: metadata sidecar of both\.csv: expected a "
                                              r"JSON object, got a JSON list"):
        load_recording(p)


def test_mcap_export_is_read_by_mcap_and_rosbags_with_the_robots_joint_names(tmp_path):
    from mcap.reader import make_reader
    from rosbags.typesys import Stores, get_typestore

    from robident_twin.model.robot import load_robot

    rec = _recording()
    path = save_recording(rec, tmp_path / "r.mcap")
    ts = get_typestore(Stores.ROS2_HUMBLE)
    names, q = [], []
    with open(path, "rb") as f:
        reader = make_reader(f)
        assert reader.get_header().profile == "ros2"
        for schema, channel, message in reader.iter_messages(topics=["/joint_states"]):
            assert schema.name == "sensor_msgs/msg/JointState" and channel.message_encoding == "cdr"
            msg = ts.deserialize_cdr(message.data, schema.name)
            names.append(list(msg.name))
            q.append(np.asarray(msg.position))
    assert len(q) == len(rec.t_s)
    expected = list(load_robot("iiwa14").joint_names)
    assert expected[0] == "A1" and all(n == expected for n in names)
    np.testing.assert_array_equal(np.array(q), rec.q_rad)
    # an imported bag keeps its own names through a re-export
    back = load_recording(path)
    assert back.metadata["joint_names"] == expected


def test_trajectory_mcap_read_by_rosbags(tmp_path):
    from mcap.reader import make_reader
    from rosbags.typesys import Stores, get_typestore

    t = np.arange(5) * 0.01
    q = np.outer(t, np.arange(1, 3))
    path = save_trajectory(JointTrajectory(t, q, q, q, period_s=0.05), tmp_path / "t.mcap", joint_names=["A1", "A2"])
    ts = get_typestore(Stores.ROS2_HUMBLE)
    with open(path, "rb") as f:
        (schema, _, message), = list(make_reader(f).iter_messages())
    msg = ts.deserialize_cdr(message.data, schema.name)
    assert list(msg.joint_names) == ["A1", "A2"] and len(msg.points) == 5
    np.testing.assert_array_equal(msg.points[3].positions, q[3])


def test_exports_and_imports_get_the_umask_mode(tmp_path, umask_027):
    """Not the 0600 of tempfile.mkstemp: a file another group member can read when the umask says so."""
    from robident_twin.file_tasks import import_recording

    rec = _recording()
    written = [save_recording(rec, tmp_path / f"r.{ext}") for ext in ("csv", "npz", "mat", "mcap")]
    written.append(tmp_path / "r.csv.meta.json")
    src = save_recording(rec, tmp_path / "src.npz")
    import_recording({"input": str(src), "output_format": "mcap"}, tmp_path / "imp")
    written += [tmp_path / "imp" / "src.mcap", tmp_path / "imp" / "import_summary.json"]
    assert {p.name: oct(_mode(p)) for p in written} == {p.name: oct(0o640) for p in written}
    os.umask(0o022)
    assert _mode(save_recording(rec, tmp_path / "r.mcap")) == 0o644
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()]  # no temporary file left behind


@pytest.fixture(scope="module")
def exported_urdf(tmp_path_factory):
    """The URDF as task=export writes it (model.builders.to_urdf of the robot file as loaded back,
    written with the project's atomic write)."""
    from robident_twin.model.builders import to_urdf
    from robident_twin.model.robot import load_robot
    from robident_twin.report.identified_twin import _atomic_write

    spec = load_robot("iiwa14")
    path = tmp_path_factory.mktemp("urdf") / "iiwa14.urdf"
    _atomic_write(path, to_urdf(spec))
    return spec, path


def test_exported_urdf_loads_in_plain_pybullet(exported_urdf):
    import pybullet as pb

    spec, path = exported_urdf
    cid = pb.connect(pb.DIRECT)
    try:
        body = pb.loadURDF(str(path), useFixedBase=True, physicsClientId=cid)
        info = [pb.getJointInfo(body, k, physicsClientId=cid) for k in range(pb.getNumJoints(body, physicsClientId=cid))]
        revolute = [i for i in info if i[2] == pb.JOINT_REVOLUTE]
        assert [i[1].decode() for i in revolute] == list(spec.joint_names)
        masses = [pb.getDynamicsInfo(body, i[0], physicsClientId=cid)[0] for i in revolute]
        np.testing.assert_allclose(masses, [j.link.mass_kg for j in spec.joints], rtol=1e-12)
    finally:
        pb.disconnect(cid)


def test_exported_urdf_loads_in_yourdfpy(exported_urdf):
    import yourdfpy  # the test extra
    spec, path = exported_urdf
    urdf = yourdfpy.URDF.load(str(path), load_meshes=False, build_scene_graph=False)
    assert urdf.actuated_joint_names == list(spec.joint_names)
    links = {link.name: link for link in urdf.robot.links}
    child = {j.name: j.child for j in urdf.robot.joints}
    np.testing.assert_allclose([links[child[n]].inertial.mass for n in spec.joint_names],
                               [j.link.mass_kg for j in spec.joints], rtol=1e-12)

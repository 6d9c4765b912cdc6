"""Recorded files in and out of the HAL (issue 6).

Importers return a :class:`hal.protocol.Recording` in SI units with ``metadata["source"]`` and
``metadata["units"]``; exporters write atomically. See each module's docstring for its format:

- :mod:`.csv_io`    CSV with documented columns and units (recordings and trajectories)
- :mod:`.mat_io`    MATLAB .mat: the CLOOS ICMA 2020 dataset and generic named variables
- :mod:`.ros_io`    rosbag2 / MCAP: sensor_msgs/JointState in, JointState and
                    trajectory_msgs/JointTrajectory out
- :mod:`.kuka_trace` KUKA KRC4 trace (DIAdem .dat header + .r64 data)
- :mod:`.krl`       a trajectory as a KRL program (.src/.dat) with E6AXIS points in degrees
- :mod:`.backend`   the ``file`` HAL backend
"""
from .common import FileFormatError  # noqa: F401
from .io import FORMATS, detect_format, load_recording, save_recording, save_trajectory, summary  # noqa: F401

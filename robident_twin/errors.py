"""Errors that name what is wrong and where. The CLI prints them and exits non-zero."""


class RobidentError(Exception):
    """Base class for every error the pipeline raises on bad input."""


class ConfigError(RobidentError):
    """A configuration value is missing, unknown or out of range."""


class RobotSpecError(RobidentError):
    """A robot source-of-truth file is missing a field or is not physical."""


class TrajectoryError(RobidentError):
    """A trajectory violates a robot limit or is malformed."""


class RecordingError(RobidentError):
    """A recording is malformed (NaN, wrong shape, gaps)."""


class IdentificationError(RobidentError):
    """The identification problem itself is ill-posed (rank deficiency, ...)."""


# Import of a user's URDF / MJCF (robident_twin.model.importer): one class per thing it cannot model,
# each a RobotSpecError so callers that catch robot-file errors catch these too.
class FloatingBaseError(RobotSpecError):
    """The robot description has a floating (free-flyer) base; only fixed-base arms are supported."""


class ClosedChainError(RobotSpecError):
    """The robot description has a closed kinematic chain (a link with two parents, an equality constraint)."""


class UnsupportedJointError(RobotSpecError):
    """A joint type the model cannot represent (prismatic, planar, ball, ...) that is not locked, or a branch."""


class MissingInertialError(RobotSpecError):
    """A link moved by a joint has no inertial data at all."""


class ZeroMassError(RobotSpecError):
    """A link moved by a joint has zero (or non-positive) total mass."""


class OverlayError(RobotSpecError):
    """The overlay YAML of an imported robot has an unknown key or a bad value."""

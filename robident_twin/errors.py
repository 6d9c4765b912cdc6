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

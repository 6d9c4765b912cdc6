"""The ``trajectory`` group's schemas are the design stage's own config types (:mod:`robident_twin.design.config`)."""
from ..design.config import *  # noqa: F401,F403
from ..design.config import FILE_FORMATS, TRAJECTORIES, ExcitationTrajectory  # noqa: F401

"""The ``backend`` group's schemas are the HAL's own config types (:mod:`hal.config`)."""
from hal.config import *  # noqa: F401,F403
from hal.config import _RealCommon  # noqa: F401

"""The generic config checker lives on the floor (:mod:`robident_twin.typed`), so that each layer
(the HAL first) can own the schemas of its config; this name stays for the config package."""
from ..typed import MISSING, Errors, build, convert, key, to_plain  # noqa: F401

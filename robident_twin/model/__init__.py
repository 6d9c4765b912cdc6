"""Model layer (bottom): robot spec and import, model builders (URDF/MJCF/pinocchio), dynamics,
regressor, base parameters, the nominal (CAD-like) model. Imports nothing above it."""

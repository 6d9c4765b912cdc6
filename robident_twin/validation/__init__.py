"""Validation stage: Monte-Carlo runs and sweeps against a twin's ground truth, collision detection."""

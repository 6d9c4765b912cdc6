"""Estimation stage: OLS/WLS/IV/ML/TLS estimators, model reduction, physically consistent parameters."""

"""Signal processing stage: period averaging, filtering, differentiation, decimation."""

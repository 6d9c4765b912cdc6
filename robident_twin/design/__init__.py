"""Excitation design stage: Fourier trajectories, limits, criteria, constraints, optimisers, Swevers'
iteration, process trajectories, stored designs and the dry run."""

"""Simulation engines fieldrl owns: numpy only, batched where it pays, no gym/SB3 imports."""

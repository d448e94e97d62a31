"""Evaluation: the runner (policies x seeds), statistics and the run folder."""

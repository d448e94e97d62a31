"""Multi-UAV edge-computing simulator: the engine (``engine``), channel and mobility models
(``channel``, ``mobility``), the SOCP trajectory and LP offloading solvers (``opt``, cvxpy and HiGHS)
and its parameters (``params``, pydantic models the engine validates its inputs with)."""

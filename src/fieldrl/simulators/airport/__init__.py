"""Airport surface simulator: the engine (``engine``), layouts (``layout``, ``osm``) and the
time-expanded planner the baselines use (``planning``). numpy only."""

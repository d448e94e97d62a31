"""Names of the traffic env's episode KPIs and trace columns, importable without SUMO."""

#: episode numbers ``episode_info`` reports (the domain's KPIs) and per-step trace numbers
KPI_KEYS = (
    "person_delay_mean",
    "vehicle_delay_mean",
    "vehicle_delay_p95",
    "pedestrian_delay_mean",
    "pedestrian_delay_p95",
    "pedestrian_max_wait",
    "vehicle_max_wait",
    "throughput",
    "jain_modes",
    "queue_mean",
)
TRACE_KEYS = ("time_s", "queue_now", "peds_waiting_now", "ped_longest_wait_now", "stage_now")

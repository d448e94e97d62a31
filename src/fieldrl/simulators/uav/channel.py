"""Radio, computing and flight-energy models of the multi-UAV edge-computing engine (numpy, batched).

* Air-to-ground links: mean path loss of Al-Hourani, Kandeepan & Lardner (2014), "Optimal LAP
  altitude for maximum coverage", IEEE WCL 3(6): free-space path loss plus an excess loss
  eta_LoS or eta_NLoS weighted by the LoS probability
  ``P_LoS(theta) = 1 / (1 + a exp(-b (theta - a)))``, theta the elevation angle in degrees
  (urban: a = 9.61, b = 0.16, eta_LoS = 1 dB, eta_NLoS = 20 dB).
* Vehicle-to-base-station links: 3GPP TR 38.901 v17 Table 7.4.1-1, urban macro (UMa),
  ``PL_NLOS = max(PL_LOS, 13.54 + 39.08 log10 d3D + 20 log10 fc - 0.6 (h_UT - 1.5))`` with
  ``PL_LOS = 28.0 + 22 log10 d3D + 20 log10 fc`` (the below-breakpoint LOS formula; fc in GHz,
  d in m). Shadow fading is left out: the engine uses mean losses.
* Shannon rate ``B log2(1 + P 10^(-PL/10) / (N0 B))`` with the noise over the granted band.
* Computing energy ``kappa f^2`` per cycle (dynamic CMOS power), radio energy ``P t``.
* Rotary-wing propulsion power of Zeng, Xu & Zhang (2019), "Energy minimization for wireless
  communication with rotary-wing UAV", IEEE TWC 18(4), eq. (12), plus climbing work ``W dz``.
"""

from __future__ import annotations

import numpy as np

LIGHT_SPEED = 299_792_458.0


def elevation_deg(horizontal_m: np.ndarray, height_m: np.ndarray) -> np.ndarray:
    """Elevation angle (degrees) of a transmitter ``height_m`` above and ``horizontal_m`` away."""
    return np.degrees(np.arctan2(np.asarray(height_m, float), np.asarray(horizontal_m, float)))


def los_probability(elev_deg: np.ndarray, a: float = 9.61, b: float = 0.16) -> np.ndarray:
    """Al-Hourani 2014 S-curve: probability of line of sight at elevation ``elev_deg`` (degrees)."""
    return 1.0 / (1.0 + a * np.exp(-b * (np.asarray(elev_deg, float) - a)))


def free_space_path_loss_db(distance_m: np.ndarray, carrier_hz: float) -> np.ndarray:
    """Friis free-space path loss ``20 log10(4 pi f d / c)`` (dB)."""
    d = np.maximum(np.asarray(distance_m, float), 1.0)
    return 20.0 * np.log10(4.0 * np.pi * carrier_hz * d / LIGHT_SPEED)


def a2g_path_loss_db(
    horizontal_m: np.ndarray,
    height_m: np.ndarray,
    carrier_hz: float,
    a: float = 9.61,
    b: float = 0.16,
    eta_los_db: float = 1.0,
    eta_nlos_db: float = 20.0,
) -> np.ndarray:
    """Mean air-to-ground path loss (dB): FSPL + P_LoS eta_LoS + (1 - P_LoS) eta_NLoS."""
    horizontal = np.asarray(horizontal_m, float)
    height = np.asarray(height_m, float)
    p_los = los_probability(elevation_deg(horizontal, height), a, b)
    distance = np.hypot(horizontal, height)
    return free_space_path_loss_db(distance, carrier_hz) + p_los * eta_los_db + (1.0 - p_los) * eta_nlos_db


def uma_path_loss_db(distance_3d_m: np.ndarray, carrier_ghz: float, ut_height_m: float = 1.5) -> np.ndarray:
    """3GPP TR 38.901 UMa NLOS path loss (dB), never below the UMa LOS loss."""
    d = np.maximum(np.asarray(distance_3d_m, float), 10.0)  # the model is specified from 10 m
    los = 28.0 + 22.0 * np.log10(d) + 20.0 * np.log10(carrier_ghz)
    nlos = 13.54 + 39.08 * np.log10(d) + 20.0 * np.log10(carrier_ghz) - 0.6 * (ut_height_m - 1.5)
    return np.maximum(los, nlos)


def noise_power_w(bandwidth_hz: np.ndarray, noise_dbm_hz: float, noise_figure_db: float) -> np.ndarray:
    """Thermal noise over ``bandwidth_hz`` including the receiver noise figure (W)."""
    return 10.0 ** ((noise_dbm_hz + noise_figure_db - 30.0) / 10.0) * np.asarray(bandwidth_hz, float)


def shannon_rate_bps(
    bandwidth_hz: np.ndarray,
    tx_power_w: float,
    path_loss_db: np.ndarray,
    noise_dbm_hz: float,
    noise_figure_db: float,
) -> np.ndarray:
    """``B log2(1 + P g / (N0 B))`` in bit/s; zero where the granted bandwidth is zero."""
    band = np.asarray(bandwidth_hz, float)
    gain = 10.0 ** (-np.asarray(path_loss_db, float) / 10.0)
    noise = noise_power_w(np.where(band > 0, band, 1.0), noise_dbm_hz, noise_figure_db)
    rate = band * np.log2(1.0 + tx_power_w * gain / noise)
    return np.where(band > 0, rate, 0.0)


def spectral_efficiency(
    bandwidth_hz: np.ndarray,
    tx_power_w: float,
    path_loss_db: np.ndarray,
    noise_dbm_hz: float,
    noise_figure_db: float,
) -> np.ndarray:
    """Rate per hertz (bit/s/Hz) if the whole ``bandwidth_hz`` were granted."""
    band = np.maximum(np.asarray(bandwidth_hz, float), 1e-9)
    return shannon_rate_bps(band, tx_power_w, path_loss_db, noise_dbm_hz, noise_figure_db) / band


def computing_energy_j(kappa: float, freq_hz: np.ndarray, cycles: np.ndarray) -> np.ndarray:
    """Dynamic CPU energy ``kappa f^2 cycles`` (J)."""
    return kappa * np.asarray(freq_hz, float) ** 2 * np.asarray(cycles, float)


def propulsion_power_w(
    speed_mps: np.ndarray,
    p0: float = 79.86,
    pi: float = 88.63,
    u_tip: float = 120.0,
    v0: float = 4.03,
    d0: float = 0.6,
    rho: float = 1.225,
    s: float = 0.05,
    area: float = 0.503,
) -> np.ndarray:
    """Zeng, Xu & Zhang 2019 eq. (12): power (W) of level flight at speed ``speed_mps``.

    ``P0 (1 + 3V^2/U_tip^2) + Pi (sqrt(1 + V^4/(4 v0^4)) - V^2/(2 v0^2))^(1/2) + d0 rho s A V^3 / 2``
    """
    v = np.asarray(speed_mps, float)
    blade = p0 * (1.0 + 3.0 * v**2 / u_tip**2)
    inner = np.sqrt(1.0 + v**4 / (4.0 * v0**4)) - v**2 / (2.0 * v0**2)
    induced = pi * np.sqrt(np.maximum(inner, 0.0))
    parasite = 0.5 * d0 * rho * s * area * v**3
    return blade + induced + parasite

"""Every registered domain passes fieldrl's shipped conformance check (``fieldrl.testing.check_domain``)."""

from __future__ import annotations

import pytest

from fieldrl.domains import domain_names


@pytest.mark.parametrize("name", domain_names())
def test_domain_meets_the_contract(name, tmp_path):
    """(A domain whose extra is not installed is skipped by name: tests/conftest.py.)"""
    from fieldrl.testing import check_domain

    check_domain(name, folder=tmp_path)


def test_a_broken_domain_is_named_with_what_failed(monkeypatch):
    from fieldrl.domains import get_domain
    from fieldrl.testing import check_domain

    domain = get_domain("memory")
    original = type(domain).episode_kpis
    monkeypatch.setattr(
        type(domain), "episode_kpis", lambda self, record: {"return": original(self, record)["return"]}
    )
    with pytest.raises(
        AssertionError, match=r"domain 'memory', runner.*left out the declared KPIs \['success'\]"
    ):
        check_domain(domain, report=False)


def test_a_stress_axis_that_moves_the_world_at_its_trained_value_is_named(monkeypatch):
    import dataclasses

    from fieldrl.domains import get_domain
    from fieldrl.testing import check_domain

    domain = get_domain("memory")
    noise = domain.stress_axes["noise"]
    drifting = dataclasses.replace(noise, apply=lambda raw, value: {**raw, "noise": value / 2 + 0.01})
    monkeypatch.setattr(type(domain), "stress_axes", {**domain.stress_axes, "noise": drifting})
    with pytest.raises(AssertionError, match=r"stress axis 'noise': apply\(params, trained value\) changes"):
        check_domain(domain, report=False)

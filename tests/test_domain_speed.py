"""Each domain's measured speed is its own (``Domain.speed``), and ``fieldrl list`` reads the same figure
from the domain's source without importing it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from fieldrl import estimates
from fieldrl.domains import domain_names, get_domain, unavailable
from fieldrl.domains.speed import DEFAULT_SPEED, Speed, _speed_in, declared_speed


@pytest.mark.parametrize("name", domain_names())
def test_the_speed_read_from_source_is_the_domains_own(name: str) -> None:
    if unavailable(name) is not None:
        pytest.skip(f"{name}: {unavailable(name)}")
    assert declared_speed(name) == get_domain(name).speed != DEFAULT_SPEED
    assert estimates.speed_of(name) == get_domain(name).speed


def test_reading_every_speed_imports_no_domain() -> None:
    code = textwrap.dedent(
        """
        import json, sys
        from fieldrl.domains import domain_names
        from fieldrl.domains.speed import declared_speed
        read = {name: declared_speed(name) is not None for name in domain_names()}
        imported = sorted(m for m in sys.modules if m.count(".") >= 2 and m.startswith("fieldrl.domains."))
        print(json.dumps({"read": read, "imported": imported}))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert all(answer["read"].values()), answer
    assert answer["imported"] == ["fieldrl.domains.base", "fieldrl.domains.speed"]


def test_a_domain_without_a_literal_speed_takes_the_default() -> None:
    import ast

    def body(text: str) -> ast.ClassDef:
        node = ast.parse(textwrap.dedent(text)).body[0]
        assert isinstance(node, ast.ClassDef)
        return node

    assert _speed_in(body("class D:\n    speed = Speed(1.0, off_policy=2.0, episode_s=0.5)\n")) == Speed(
        1, 2, 0.5
    )
    assert _speed_in(body("class D:\n    speed = measured()\n")) is None
    assert _speed_in(body("class D:\n    title = 'x'\n")) is None
    assert declared_speed("no-such-domain") is None
    assert estimates.speed_of("no-such-domain") == DEFAULT_SPEED == Speed(500.0, 100.0, 1.0)

"""``fieldrl bench``: runs each benchmark script in its own process, gathers one JSON, renders a PDF."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from pypdf import PdfReader
from typer.testing import CliRunner

from fieldrl.cli import app

cli = CliRunner()

TOY = """
import json, sys
from pathlib import Path
quick = "--quick" in sys.argv
out = Path(__file__).parent / "results" / ("quick" if quick else "") / "toy.json"
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({
    "benchmark": "toy",
    "quick": quick,
    "headline": [{"label": "toy speed ratio", "value": 12.5, "unit": "x", "target": ">= 10x"}],
    "curves": [{"title": "toy scaling", "xlabel": "n", "ylabel": "s",
                "series": {"toy": {"x": [1, 2, 4], "y": [3.0, 2.0, 1.5]}}}],
}))
"""


def _bench_dir(tmp_path: Path, broken: bool) -> Path:
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "bench_toy.py").write_text(textwrap.dedent(TOY))
    if broken:
        (folder / "bench_broken.py").write_text("raise RuntimeError('sensor unplugged')\n")
    return folder


def test_bench_gathers_results_and_renders_a_pdf(tmp_path):
    folder = _bench_dir(tmp_path, broken=False)
    full = folder / "results" / "toy.json"
    full.parent.mkdir()
    full.write_text(json.dumps({"benchmark": "toy", "quick": False}))
    result = cli.invoke(app, ["bench", "--dir", str(folder), "--quick"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    suite = json.loads((folder / "results/quick/suite.json").read_text())
    assert suite["quick"] is True and suite["results"]["toy"]["quick"] is True
    assert suite["runs"]["toy"]["exit_status"] == 0
    assert json.loads(full.read_text())["quick"] is False  # a quick run never replaces full figures
    assert not (folder / "results/suite.json").exists()
    assert "toy speed ratio" in result.output and "12.5" in result.output
    text = " ".join(page.extract_text() for page in PdfReader(folder / "results/quick/benchmarks.pdf").pages)
    assert "toy speed ratio" in text and ">= 10x" in text


def test_a_failing_benchmark_is_reported_and_the_others_still_count(tmp_path):
    folder = _bench_dir(tmp_path, broken=True)
    result = cli.invoke(app, ["bench", "--dir", str(folder)])
    assert result.exit_code == 1
    suite = json.loads((folder / "results/suite.json").read_text())
    assert suite["runs"]["broken"]["exit_status"] != 0
    assert "sensor unplugged" in suite["runs"]["broken"]["error"]
    assert suite["results"]["toy"]["headline"][0]["value"] == 12.5


def test_unknown_benchmark_or_folder_is_a_clear_error(tmp_path):
    folder = _bench_dir(tmp_path, broken=False)
    result = cli.invoke(app, ["bench", "--dir", str(folder), "--only", "warp"])
    assert result.exit_code == 2 and "'warp'" in result.output and "toy" in result.output
    result = cli.invoke(app, ["bench", "--dir", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "--dir" in result.output

"""SUMO's own signal programs, loaded beside fieldrl's control for the standard heuristics.

* ``0``: the fixed-time program netconvert/netgenerate builds (SUMO's defaults: 90 s cycle
  split between the major greens, 5 s pedestrian clearance, 3 s yellow);
* ``actuated``: the same phases as SUMO ``type="actuated"`` (gap-based extension with the induction
  loops SUMO places itself), each green phase (protected left turns included, pedestrian
  clearances not) between ``min_green_s`` and ``max_green_s``;
* ``webster``: fixed-time with cycle and splits from SUMO's ``tlsCycleAdaptation.py`` (Webster's
  formula) for the busiest demand period's mean rates. The tool treats the pedestrian-clearance
  phase as one more green and, at light demand, cuts walk and clearance to 4 s each; fieldrl
  restores the pedestrian minimums afterwards (each major green at least ``min_green_s``, each
  clearance ``ped_clearance_s``), which lengthens the cycle a little.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from fieldrl.domains.traffic import sumo
from fieldrl.domains.traffic.demand import Period, nominal_vehicles_xml
from fieldrl.domains.traffic.networks import cache_root, digest, write_atomic

Program = list[tuple[float, str]]  # (duration, state) per phase


def actuated_xml(programs: dict[str, Program], min_green: int, max_green: int) -> str:
    lines = ["<additional>"]
    for tls, phases in programs.items():
        lines.append(f'  <tlLogic id="{tls}" type="actuated" programID="actuated" offset="0">')
        for k, (duration, state) in enumerate(phases):
            prev = phases[k - 1][1]
            # every green phase extends on demand (protected left-turn phases too, or they starve
            # while the through phases run to max green); yellows and pedestrian clearances stay fixed
            major = "y" not in state and any(c in "Gg" for c in state) and not _is_clearance(state, prev)
            if major:
                lines.append(
                    f'    <phase duration="{duration:g}" minDur="{min(min_green, duration):g}" '
                    f'maxDur="{max(max_green, duration):g}" state="{state}"/>'
                )
            else:
                lines.append(f'    <phase duration="{duration:g}" state="{state}"/>')
        lines.append("  </tlLogic>")
    lines.append("</additional>")
    return "\n".join(lines) + "\n"


def actuated_file(net_file: Path, programs: dict[str, Program], min_green: int, max_green: int) -> Path:
    path = cache_root() / "programs" / f"actuated-{digest([str(net_file), min_green, max_green, 2])}.add.xml"
    if not path.exists():
        write_atomic(path, actuated_xml(programs, min_green, max_green))
    return path


def _is_clearance(state: str, prev: str) -> bool:
    greens = {i for i, c in enumerate(state) if c in "Gg"}
    prev_greens = {i for i, c in enumerate(prev) if c in "Gg"}
    return "y" not in state and "y" not in prev and bool(greens) and greens < prev_greens


def restore_pedestrian_minimums(xml: str, min_green_s: int, ped_clearance_s: int) -> str:
    """Major greens at least ``min_green_s``; pedestrian-clearance phases exactly ``ped_clearance_s``."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(xml)
    for logic in root.iter("tlLogic"):
        phases = list(logic.iter("phase"))
        for k, phase in enumerate(phases):
            state, prev = phase.get("state", ""), phases[k - 1].get("state", "")
            duration = float(phase.get("duration", "0"))
            if _is_clearance(state, prev):
                phase.set("duration", str(ped_clearance_s))
            elif "y" not in state and any(c in "Gg" for c in state):
                phase.set("duration", f"{max(duration, min_green_s):g}")
    return ET.tostring(root, encoding="unicode")


def webster_file(
    net_file: Path,
    periods: Sequence[Period],
    yellow_s: int,
    all_red_s: int,
    min_green_s: int = 10,
    ped_clearance_s: int = 5,
) -> Path:
    """Run ``tlsCycleAdaptation.py`` on an hour of the busiest period's mean demand (cached)."""
    busiest = max(periods, key=lambda p: p.vehicles_main + p.vehicles_side)
    key = digest([str(net_file), busiest.__dict__, yellow_s, all_red_s, min_green_s, ped_clearance_s, "v2"])
    path = cache_root() / "programs" / f"webster-{key}.add.xml"
    if path.exists():
        return path
    routes = cache_root() / "programs" / f"webster-{key}.rou.xml"
    write_atomic(routes, nominal_vehicles_xml(net_file, busiest))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # workers may build it at the same time
    cmd = [
        *sumo.python_tool_cmd("tlsCycleAdaptation.py"),
        "-n", str(net_file), "-r", str(routes), "-o", str(tmp), "-b", "0",
        "-y", str(yellow_s), "-a", str(all_red_s), "-g", str(min_green_s), "-p", "webster",
    ]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0 or not tmp.exists():
        raise RuntimeError(f"tlsCycleAdaptation.py failed: {(result.stderr or result.stdout)[-500:]}")
    write_atomic(path, restore_pedestrian_minimums(tmp.read_text(), min_green_s, ped_clearance_s))
    tmp.unlink()
    return path


def program_phases(path: Path, program_id: str) -> dict[str, Program]:
    """Per junction, the ``(duration, state)`` phases of program ``program_id`` in a SUMO
    additional file fieldrl wrote (the Webster file above)."""
    import xml.etree.ElementTree as ET

    out: dict[str, Program] = {}
    for logic in ET.parse(path).getroot().iter("tlLogic"):
        if logic.get("programID") == program_id:
            out[str(logic.get("id"))] = [
                (float(ph.get("duration", 0)), str(ph.get("state"))) for ph in logic.iter("phase")
            ]
    return out


def stage_plan(phases: Program, stages: list[str]) -> tuple[dict[int, int], dict[int, int]]:
    """A program's timing as a stage controller can run it: per stage it shows, the seconds of
    green it gives that stage in a cycle, and the stage it shows next.

    Phases that show none of ``stages`` (clearances, yellows, all-reds) are the controller's own
    transitions and are left out; so is a stage the program never shows.
    """
    shown_for = [(stages.index(state), duration) for duration, state in phases if state in stages]
    green: dict[int, int] = {}
    for k, duration in shown_for:
        green[k] = green.get(k, 0) + int(round(duration))
    shown = [k for k, _ in shown_for]
    following: dict[int, int] = {}
    for j, k in enumerate(shown):
        nxt = next((x for x in shown[j + 1 :] + shown[: j + 1] if x != k), k)
        following.setdefault(k, nxt)
    return green, following

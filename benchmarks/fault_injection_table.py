"""Print the fault-injection counts per protocol and fault kind (issue 13's closing note):
commands on the wire (captured by the emulator), commands beyond one cycle's step or outside the
joint limits found there, and the guard's own counts (checked, clamped, aborts, rejoins, gaps).

    PYTHONPATH=. python benchmarks/fault_injection_table.py [--markdown]

The cases and the wire check are those of tests/test_fault_injection.py."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_fault_injection import PROTOCOLS, fault_cases, run_case  # noqa: E402

from robident_twin.model.robot import load_robot  # noqa: E402


def main() -> int:
    md = "--markdown" in sys.argv
    cols = ("protocol", "fault", "result", "on wire", "beyond step", "outside limits", "worst step",
            "checked", "clamped", "aborts", "rejoins", "rejoin samples", "gaps", "mode changes", "foreign")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for protocol in PROTOCOLS:
            spec = load_robot(PROTOCOLS[protocol][0])
            for fault, faults in fault_cases(protocol, spec).items():
                o = run_case(protocol, fault, faults, Path(d) / protocol)
                g = o.guard
                rows.append((protocol, fault, o.result, o.commands_on_wire, o.beyond_step, o.outside_limits,
                             f"{o.worst_step_ratio:.2f}", g["checked"], g["clamped"], g["aborts"], g["rejoins"],
                             g["rejoin_samples"], g["gaps"], g["mode_changes"], o.link["foreign"]))
                print(*rows[-1], sep="\t", file=sys.stderr)
    if md:
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for r in rows:
            print("| " + " | ".join(str(x) for x in r) + " |")
    else:
        w = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
        for r in (cols, *rows):
            print("  ".join(str(x).ljust(n) for x, n in zip(r, w)))
    bad = sum(r[4] + r[5] for r in rows)
    print(f"\n{len(rows)} runs, {sum(r[3] for r in rows)} commands on the wire, {bad} breaking the invariant")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Print (or with --write, put into README.md) the status table built from verif/manifest.toml.

The table lists, per trace suite and unit family, how many of NVIDIA's traces each engine must
pass (the manifest) out of how many exist under ../shared/nvdla/traces.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verif import manifest  # noqa: E402
from verif.shared import nvdla_dir  # noqa: E402

BEGIN, END = "<!-- status-table:begin -->", "<!-- status-table:end -->"


def family(name: str) -> str:
    return name.split("/")[-1].split("_")[0]


def table() -> str:
    m = manifest.load()
    totals: Counter = Counter()
    for suite in ("nv_small", "nv_small_generated"):
        d = nvdla_dir() / "traces" / suite
        if d.is_dir():
            for t in d.iterdir():
                if any(t.glob("*.cfg")):
                    totals[(suite, family(t.name))] += 1
    lines = ["| suite | traces | total | must pass on model (nv_small) | on model (nv_small_ew) | on rtl (nv_small) "
             "| on rtl (nv_small_ew) |",
             "|---|---|---|---|---|---|---|"]
    keys = sorted(totals) or sorted({(n.split('/')[0], family(n)) for names in m.values() for n in names})
    for suite, fam in keys:
        cnt = {e: sum(1 for n in m.get(e, ()) if n.startswith(suite + "/") and family(n) == fam)
               for e in ("model", "model_ew", "rtl", "rtl_ew")}
        lines.append(f"| {suite} | {fam}_* | {totals.get((suite, fam), '?')} | {cnt['model']} | "
                     f"{cnt['model_ew']} | {cnt['rtl']} | {cnt['rtl_ew']} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the table in README.md")
    args = ap.parse_args()
    t = table()
    if not args.write:
        print(t)
        return 0
    readme = ROOT / "README.md"
    text = readme.read_text()
    new = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), BEGIN + "\n" + t + "\n" + END, text, flags=re.S)
    readme.write_text(new)
    print("README.md status table updated")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

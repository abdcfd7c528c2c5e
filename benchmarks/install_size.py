"""Install size of the lean install (``pip install -e .``) against the full one (``-e '.[bertscore]'``).

Measured in the current venv, which holds the full install: the requirements in pyproject.toml are followed
through each installed distribution's own requirements (with their markers and extras) to two closures,
lean (``dependencies``) and full (``dependencies`` plus the ``bertscore`` extra), and each closure's size is
the sum of the files its distributions installed (their RECORD, as ``pip uninstall`` would remove them).
The project itself, pip and the test tools are in neither closure. No network, no new venv.

    .venv/bin/python benchmarks/install_size.py          # --json for the figures as JSON
"""

from __future__ import annotations

import argparse
import json
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
TARGET_SHARE = 0.5


def _installed() -> dict[str, metadata.Distribution]:
    return {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions()}


def closure(requirements: list[str], installed: dict[str, metadata.Distribution]) -> set[str]:
    """Installed distributions these requirements pull in, following each one's own requirements."""
    seen: set[str] = set()
    todo = [(Requirement(r), frozenset()) for r in requirements]
    while todo:
        req, parent_extras = todo.pop()
        env_extras = parent_extras or {""}
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in env_extras):
            continue
        name = canonicalize_name(req.name)
        dist = installed.get(name)
        if dist is None:
            continue
        key = f"{name}[{','.join(sorted(req.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        todo.extend((Requirement(r), frozenset(req.extras)) for r in dist.requires or [])
    return {k.split("[")[0] for k in seen}


def size_bytes(dist: metadata.Distribution) -> int:
    """Bytes of the files a distribution installed (its RECORD)."""
    total = 0
    for file in dist.files or []:
        path = Path(dist.locate_file(file))
        if path.is_file():
            total += path.stat().st_size
    return total


def measure() -> dict:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    installed = _installed()
    lean = closure(project["dependencies"], installed)
    full = closure(project["dependencies"] + project["optional-dependencies"]["bertscore"], installed)
    sizes = {name: size_bytes(installed[name]) for name in full}
    only_bertscore = sorted(full - lean, key=lambda n: -sizes[n])
    lean_bytes = sum(sizes[n] for n in lean)
    full_bytes = sum(sizes.values())
    return {
        "lean_mb": round(lean_bytes / 1e6, 1),
        "full_mb": round(full_bytes / 1e6, 1),
        "lean_share_of_full": round(lean_bytes / full_bytes, 3),
        "lean_distributions": len(lean),
        "full_distributions": len(full),
        "bertscore_only": [(n, round(sizes[n] / 1e6, 1)) for n in only_bertscore],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args()
    figures = measure()
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    share = figures["lean_share_of_full"]
    verdict = "meets" if share < TARGET_SHARE else "MISSES"
    print(f"full install (-e '.[bertscore]'): {figures['full_mb']:>8.1f} MB in {figures['full_distributions']} "
          "distributions")
    print(f"lean install (-e .):              {figures['lean_mb']:>8.1f} MB in {figures['lean_distributions']} "
          f"distributions, {share:.0%} of full ({verdict} the under-{TARGET_SHARE:.0%} target)")
    biggest = ", ".join(f"{n} {mb:.0f} MB" for n, mb in figures["bertscore_only"][:6])
    print(f"only for BERTScore ({len(figures['bertscore_only'])} distributions): {biggest}, ...")


if __name__ == "__main__":
    main()

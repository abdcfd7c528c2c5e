"""The ``medhelm_core`` of an earlier commit, for benchmarks that compare this code with the code before a change.

Extracted with ``git archive`` into a folder that goes first on ``PYTHONPATH`` of a subprocess, so both versions
run on the same machine, in the same minute, against the same data: the figures are ratios from one run.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def extract_package(rev: str, folder: str | Path) -> str | None:
    """Write ``medhelm_core`` as of git revision ``rev`` into ``folder``; the reason when it cannot, else None."""
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "medhelm_core"], capture_output=True,
                                 check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"git archive {rev} failed ({exc}); no baseline"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return None

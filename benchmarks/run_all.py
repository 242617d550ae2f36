"""Run every benchmark in this folder, one after the other, each printing its own ratios (`make bench`)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Cheapest first, so a quick look at the first figures needs no wait for the long ones.
ORDER = ("generate.py", "ingest.py", "append.py", "compaction.py", "incremental.py")


def main() -> int:
    scripts = [HERE / name for name in ORDER if (HERE / name).exists()]
    failed = []
    for i, script in enumerate(scripts, start=1):
        print(f"\n=== [{i}/{len(scripts)}] {script.name} ===", flush=True)
        started = time.monotonic()
        rc = subprocess.run([sys.executable, str(script)], check=False).returncode
        print(f"=== {script.name}: exit {rc} after {time.monotonic() - started:.0f}s ===", flush=True)
        if rc:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

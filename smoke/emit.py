#!/usr/bin/python3
"""emit.py: records one figure as a JSON line.

    emit(name, value, unit)   from a smoke script (import emit)
    emit.py NAME VALUE UNIT   from the command line

Appends {"name", "value", "unit", "commit", "time"} to build/figures.jsonl
(or to the path in $M0_FIGURES) and prints the line. "commit" is
`git rev-parse HEAD` in the project root, or "unknown"; "time" is ISO 8601
UTC. A figure is recorded, not asserted: the caller asserts its own limit.
"""

import datetime
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def figures_path():
    return os.environ.get("M0_FIGURES") or os.path.join(ROOT, "build", "figures.jsonl")


def commit():
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and sha else "unknown"


def emit(name, value, unit, out=None):
    """Appends the figure to the figures file, prints it (to out, default
    stdout) and returns the record."""
    if isinstance(value, str):
        value = float(value)
    rec = {
        "name": name,
        "value": value,
        "unit": unit,
        "commit": commit(),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
    }
    line = json.dumps(rec, sort_keys=False)
    path = figures_path()
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(path, "a") as f:
        f.write(line + "\n")
    print(line, file=out or sys.stdout, flush=True)
    return rec


def main(argv):
    if len(argv) != 3 or argv[0] in ("-h", "--help"):
        sys.stderr.write("usage: emit.py NAME VALUE UNIT   (appends to $M0_FIGURES or build/figures.jsonl)\n")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    try:
        emit(argv[0], float(argv[1]), argv[2])
    except ValueError:
        sys.stderr.write("emit.py: VALUE must be a number, got %r\n" % argv[1])
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

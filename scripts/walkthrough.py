#!/usr/bin/env python3
"""Run the README's "first 10 minutes" exactly as written, against a running `make run`.

Every ```sh block between the walkthrough markers runs, in order, in one bash session (so the
variables one block sets are there for the next); the `# expect: <regex>` line of a block must
match what the block printed. Usage: scripts/walkthrough.py [--url http://127.0.0.1:8000]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
START, END = "<!-- walkthrough:start -->", "<!-- walkthrough:end -->"
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
EXPECT = re.compile(r"^# expect: (.+)$", re.M)

MATCH = """
import re, sys
text = open(sys.argv[2]).read()
sys.exit(0 if re.search(sys.argv[1], text, re.M) else 1)
"""
CHECK = f"""
expect() {{  # expect <step> <regex> <output file>
  python3 -c {shlex.quote(MATCH)} "$2" "$3" \\
    || {{ echo "walkthrough step $1: the answer does not match /$2/"; exit 1; }}
}}
"""


def blocks(readme: str) -> list[tuple[str, str]]:
    """(commands, expected regex) of each block of the walkthrough section."""
    section = readme.split(START, 1)[1].split(END, 1)[0]
    found = []
    for body in BLOCK.findall(section):
        expected = EXPECT.findall(body)
        if len(expected) != 1:
            raise SystemExit(f"each walkthrough block needs one '# expect:' line:\n{body}")
        found.append((body, expected[0].strip()))
    return found


def script(steps: list[tuple[str, str]], outputs: Path) -> str:
    """One bash script: each block's output goes to a file, is shown, then checked."""
    # fd 3 is the terminal: a failing command inside a block (whose output goes to a file)
    # reports through it before bash exits.
    lines = ["set -euo pipefail", "exec 3>&1", CHECK]
    for number, (body, expected) in enumerate(steps, 1):
        out = shlex.quote(str(outputs / f"{number}.out"))
        lines += [
            f"echo '--- step {number}'",
            f"trap 'cat {out} >&3; echo \"walkthrough step {number} failed\" >&3' ERR",
            "{",
            body.rstrip("\n"),
            f"}} > {out} 2>&1",
            f"cat {out}",
            f"expect {number} {shlex.quote(expected)} {out}",
        ]
    lines.append(f"echo 'walkthrough: {len(steps)} steps passed'")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="where make run serves")
    args = parser.parse_args()
    steps = blocks((REPO / "README.md").read_text())
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "CARDHOUR_URL": args.url.rstrip("/")}
        result = subprocess.run(
            ["bash", "-c", script(steps, Path(folder))], cwd=REPO, env=env, check=False
        )
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Run the README's "first 10 minutes" exactly as written, against a running `make run`.

The README has the walkthrough twice: with curl (between the `walkthrough` markers) and with the
`cardhour` CLI (between the `walkthrough-cli` markers). Each runs in a bash session of its own
(so it stands alone, as a newcomer would paste it); every ```sh block of a section runs in
order in that session (so the variables one block sets are there for the next), and the
`# expect: <regex>` line of a block must match what the block printed.
Usage: scripts/walkthrough.py [--url http://127.0.0.1:8000] [--section curl|cli]
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
SECTIONS = {
    "curl": ("<!-- walkthrough:start -->", "<!-- walkthrough:end -->"),
    "cli": ("<!-- walkthrough-cli:start -->", "<!-- walkthrough-cli:end -->"),
}
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


def blocks(readme: str, start: str, end: str) -> list[tuple[str, str]]:
    """(commands, expected regex) of each block of a walkthrough section."""
    if start not in readme:
        raise SystemExit(f"README.md has no {start}")
    section = readme.split(start, 1)[1].split(end, 1)[0]
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
    parser.add_argument("--section", choices=sorted(SECTIONS), action="append")
    args = parser.parse_args()
    readme = (REPO / "README.md").read_text()
    for name in args.section or list(SECTIONS):
        print(f"=== walkthrough with {name}", flush=True)
        steps = blocks(readme, *SECTIONS[name])
        with tempfile.TemporaryDirectory() as folder:
            env = {**os.environ, "CARDHOUR_URL": args.url.rstrip("/")}
            env.pop("CARDHOUR_API_KEY", None)  # each section says which key it uses
            result = subprocess.run(
                ["bash", "-c", script(steps, Path(folder))], cwd=REPO, env=env, check=False
            )
        if result.returncode:
            return result.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())

# A check that fails spuriously, for the flaky-check tests and the landing simulation.
#
# FLAKE (0..1): the chance that one execution fails for no reason, drawn from a random number
# seeded by SEED and the execution's number, so a seed replays the same executions.
# FLAKE_COUNTER: a file outside the repository; every execution appends one line,
# "<tree> <pass|fail>", and its line count numbers the executions.
# CULPRITS: comma-separated file names; an execution on a tree holding any of them fails
# (a real failure, every time).
import os
import random
import subprocess
import sys

tree = subprocess.run(
    ["git", "rev-parse", "HEAD^{tree}"], capture_output=True, text=True, check=True
).stdout.strip()
counter = os.environ.get("FLAKE_COUNTER")
flake = float(os.environ.get("FLAKE", "0"))
seed = os.environ.get("SEED", "0")
culprits = [c for c in os.environ.get("CULPRITS", "").split(",") if c]

n = 0
if counter and os.path.exists(counter):
    with open(counter) as f:
        n = sum(1 for _ in f)
bad = any(os.path.exists(c) for c in culprits)
spurious = random.Random(f"{seed}:{n}").random() < flake
ok = not bad and not spurious
if counter:
    with open(counter, "a") as f:
        f.write(f"{tree} {'pass' if ok else 'fail'}\n")
print("ok" if ok else ("culprit" if bad else "spurious failure"))
sys.exit(0 if ok else 1)

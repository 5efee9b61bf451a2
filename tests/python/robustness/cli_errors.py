"""CLI usage errors are one line on stdout and exit code 2, never a traceback."""

import subprocess
import sys

cases = {
    ("cost", "gelu", "--shape", "x=4x4", "--scalar", "approximate=bogus"): "must be one of",
    ("emit", "add", "--shape", "x=99999999999999999999x4", "--shape", "y=4x4"): "more than a tensor can hold",
    ("cost", "add", "--shape", "x=-3x4", "--shape", "y=4x4"): "expected sizes like 8x4",
}
for argv, message in cases.items():
    run = subprocess.run(
        [sys.executable, "-m", "torch_nki", *argv], capture_output=True, text=True, check=False, timeout=120
    )
    assert run.returncode == 2, (argv, run.returncode, run.stderr)
    assert run.stdout.count("\n") == 1 and message in run.stdout, (argv, run.stdout)
    assert "Traceback" not in run.stderr, (argv, run.stderr)
print("OK")

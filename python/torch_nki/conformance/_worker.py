"""``python -m torch_nki.conformance._worker FILE ROOT ROLE TARGET OUT``: runs one corpus file
as :func:`torch_nki.conformance.run` would and writes its :class:`FileRun` as JSON to ``OUT``
(how ``--timeout`` runs each file in a child process it can kill)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path


def main(argv: list[str]) -> int:
    """Runs the file named in ``argv`` and writes the record; returns the exit code."""
    from torch_nki import nki
    from torch_nki.conformance import _sandbox
    from torch_nki.conformance._run import run_file

    file, root, role, target, out = argv
    path = Path(file).resolve()
    with _sandbox.folder_modules(path.parent), nki.as_nki(), nki.default_target(target):
        record = run_file(path, Path(root).resolve(), role)
    Path(out).write_text(json.dumps(asdict(record)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

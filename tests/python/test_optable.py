"""``docs/ops.md`` is the op table ``torch-nki table`` generates from the registry: every op
(iterating the registry), and current."""

from __future__ import annotations

from pathlib import Path

import torch_nki
from torch_nki import cli, optable

DOC = Path(__file__).resolve().parents[2] / "docs" / "ops.md"


def test_docs_ops_md_is_the_generated_table() -> None:
    text = optable.markdown()
    for op in torch_nki.ops():
        assert f"\n| `{op}` | " in text
    assert DOC.read_text(encoding="utf-8") == text, "regenerate it: torch-nki table -o docs/ops.md"


def test_cli_writes_the_table(tmp_path: Path) -> None:
    out = tmp_path / "ops.md"
    assert cli.main(["table", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == DOC.read_text(encoding="utf-8")

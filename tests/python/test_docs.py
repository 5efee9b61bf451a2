"""The command examples in the docs print what the commands print today.

Each example names its command (``$ torch-nki ...`` in a ``text`` block, or the command in
backticks before a block), which runs here through ``torch_nki.cli`` in a temporary directory.
Kernel source lines (``kernels/src/x.rs:N``) are compared as file names only, as the snapshot
tests do (``tests/src/snapshots.rs``): an example need not change when a kernel line moves.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from torch_nki import cli

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _lines_as_files(text: str) -> str:
    return re.sub(r"(\.rs):\d+(?::\d+)?", r"\1:[line]", text)


def _run(command: str, capsys: pytest.CaptureFixture[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    argv = shlex.split(command)
    assert argv[0] == "torch-nki", command
    monkeypatch.chdir(cwd)
    capsys.readouterr()
    assert cli.main(argv[1:]) == 0, command
    return capsys.readouterr().out


def _shell_examples(doc: str) -> list[tuple[str, str]]:
    """``(command, output)`` of every ``text`` block that starts with ``$ torch-nki``."""
    blocks = re.findall(
        r"```text\n\$ (torch-nki [^\n]*)\n(.*?)```", (DOCS / doc).read_text(encoding="utf-8"), re.S
    )
    return [(command, output) for command, output in blocks]


@pytest.mark.parametrize(
    ("command", "output"),
    [pytest.param(c, o, id=c) for c, o in _shell_examples("cli.md") if not c.startswith("torch-nki cache")],
)
def test_cli_examples(
    command: str,
    output: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `cache info` is left out: its directory and sizes are the reader's own.
    assert _lines_as_files(_run(command, capsys, tmp_path, monkeypatch)) == _lines_as_files(output)


def test_cli_list_example(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    section = text[text.index("## `torch-nki [--load PATH[=NS]] list`") :]
    example = re.search(r"```text\n(torch\.ops\.neuron\.\w+\n.*?)```", section, re.S)
    assert example is not None
    out = _lines_as_files(_run("torch-nki list", capsys, tmp_path, monkeypatch))
    assert _lines_as_files(example.group(1)) + "\n" in out


def test_codegen_example(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (DOCS / "nki-codegen.md").read_text(encoding="utf-8")
    found = re.search(r"`(torch-nki emit [^`]*)`:\n\n```python\n(.*?)```", text, re.S)
    assert found is not None, "nki-codegen.md shows an emitted kernel after its command"
    command, source = found.groups()
    assert _lines_as_files(_run(command, capsys, tmp_path, monkeypatch)) == _lines_as_files(source)
    # The Rust kernel the page shows is the one in the library.
    rust = re.search(r"```rust\n(.*?)```", text, re.S)
    assert rust is not None
    library = (DOCS.parent / "kernels" / "src" / "elementwise.rs").read_text(encoding="utf-8")
    assert rust.group(1) in library, "nki-codegen.md quotes a kernel that is not kernels/src/elementwise.rs's"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


PAGES = sorted([DOCS.parent / "README.md", DOCS.parent / "python" / "README.md", *DOCS.glob("*.md")])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS.parent)))
def test_relative_links_resolve(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", file.read_text(encoding="utf-8"), flags=re.M)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(target)
    assert not broken, f"{page.name}: links to nothing: {broken}"


def test_frontend_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = (DOCS / "nki-frontend.md").read_text(encoding="utf-8")
    example = re.search(r"```python\n(.*?)```", text, re.S)
    assert example is not None
    namespace: dict[str, object] = {}
    exec(compile(example.group(1), str(DOCS / "nki-frontend.md"), "exec"), namespace)
    y = namespace["y"]
    assert isinstance(y, np.ndarray) and y.shape == (300, 8) and (y == 2.0).all()
    out = capsys.readouterr().out
    assert "double on trn2 (estimate, not a measurement)" in out and "def double(x):" in out

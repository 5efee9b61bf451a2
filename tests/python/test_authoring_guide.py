"""``docs/kernel-authoring.md``'s steps for adding a kernel, followed for a throwaway kernel.

The kernel is the guide's own example, ``scale_rows`` and its backward: their ``#[kernel]``
attributes are taken from the guide as written, with the ``/* tile program */`` bodies filled in
here. It is built in a copy of the template crate (``examples/kernel-crate``, sharing that
crate's cargo target directory, so only the throwaway crate itself compiles) and loaded into the
``neuron`` namespace, where ``torch_nki.testing``, the fixture generator and the op table see
it as they see a kernel linked into ``torch_nki._native``.

Then every command of the guide's regeneration block runs, in the guide's order, on copies of
the committed artifacts (``tests/reference/fixtures``, ``docs/ops.md``): a command this suite
does not know fails it, so the block and this suite change together. Before the regeneration
steps, the checks CI runs on those artifacts must fail (the new kernel makes them stale); after
the block they must pass, and the review step checks that only files and rows about the new
kernel changed. A step missing from the guide, or one run before the rebuild it needs, leaves a
check failing. Not exercised: ``INSTA_UPDATE=always cargo test -p nki-tests``, whose snapshots
iterate the registry linked into the Rust test binaries, which a kernel from another crate is
not part of (rebuilding the workspace with it takes minutes); insta under ``CI=true`` fails on
any new snapshot there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import torch_nki
from torch_nki import cli, plugins, testing

from refs import generator

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "kernel-authoring.md"
TEMPLATE = ROOT / "examples" / "kernel-crate"
FIXTURES = ROOT / "tests" / "reference" / "fixtures"
OPS_MD = ROOT / "docs" / "ops.md"
CRATE_LIB = "guide_kernels"

# The guide's `/* tile program */`, written out: rows tiled 128 to the partitions, `s` as a
# per-partition column.
BODIES = {
    "scale_rows": """{
    let (n, d) = (x.dim(0), x.dim(1));
    let y = shared_hbm(&[n, d], x.dtype());
    let sv = s.reshape(&[n, 1]);
    for_each_tile(n, PMAX, |rows| {
        let t = sbuf([rows.size, d], x.dtype());
        let c = sbuf([rows.size, 1], x.dtype());
        dma_copy(&t, x.rows(rows.start.clone(), rows.size));
        dma_copy(&c, sv.clone().rows(rows.start.clone(), rows.size));
        tensor_scalar(&t, &t, BinOp::Multiply, &c);
        dma_copy(y.rows(rows.start, rows.size), &t);
    });
    y
}""",
    "scale_rows_backward": """{
    let (n, d) = (x.dim(0), x.dim(1));
    let dt = grad_y.dtype();
    let grad_x = shared_hbm(&[n, d], dt);
    let grad_s = shared_hbm(&[n], dt);
    let (sv, gsv) = (s.reshape(&[n, 1]), grad_s.reshape(&[n, 1]));
    for_each_tile(n, PMAX, |rows| {
        let g = sbuf([rows.size, d], dt);
        let t = sbuf([rows.size, d], dt);
        let c = sbuf([rows.size, 1], dt);
        dma_copy(&g, grad_y.rows(rows.start.clone(), rows.size));
        dma_copy(&t, x.rows(rows.start.clone(), rows.size));
        dma_copy(&c, sv.clone().rows(rows.start.clone(), rows.size));
        let prod = sbuf([rows.size, d], DType::F32);
        tensor_tensor(&prod, &g, &t, BinOp::Multiply);
        let sum = sbuf([rows.size, 1], dt);
        tensor_reduce(&sum, BinOp::Add, &prod, 1, false);
        tensor_scalar(&g, &g, BinOp::Multiply, &c);
        dma_copy(grad_x.rows(rows.start.clone(), rows.size), &g);
        dma_copy(gsv.clone().rows(rows.start, rows.size), &sum);
    });
    (grad_x, grad_s)
}""",
}


def _section() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("## Adding a kernel")
    return text[start : text.index("\n## ", start + 1)]


def _block(lang: str) -> str:
    blocks = re.findall(rf"```{re.escape(lang)}\n(.*?)```", _section(), flags=re.S)
    assert len(blocks) == 1, f"the guide's 'Adding a kernel' section should have one {lang} block"
    return blocks[0]


def guide_steps() -> list[str]:
    """The regeneration block's commands, in order, without their comments."""
    return [
        line.split("#", 1)[0].strip() for line in _block("bash").splitlines() if line.split("#", 1)[0].strip()
    ]


def guide_kernels() -> tuple[str, list[str]]:
    """The guide's kernel source with the bodies filled in, and the kernels it defines."""
    source = _block("rust,ignore")
    names = re.findall(r"pub fn (\w+)\(", source)
    assert sorted(names) == sorted(BODIES), f"the guide's example kernels changed: {names}"
    for name in names:
        head = re.compile(rf"(pub fn {name}\(.*?\) -> [^{{]*)\{{ /\* tile program \*/ \}}")
        source, n = head.subn(lambda m, name=name: m.group(1) + BODIES[name], source)
        assert n == 1, f"{name}: expected `{{ /* tile program */ }}` as its body in the guide"
    return source, names


def target_dir() -> Path:
    """Where the template crate builds (``tests/python/test_plugins.py`` builds it too)."""
    return Path(os.environ.get("CARGO_TARGET_DIR", TEMPLATE / "target"))


def make_crate(dst: Path) -> Path:
    """A copy of the template crate holding the guide's kernels instead of the template's."""
    dst.mkdir(parents=True)
    template_lib = re.search(r'\[lib\]\n(?:#.*\n)*name = "(\w+)"', (TEMPLATE / "Cargo.toml").read_text())
    assert template_lib, "the template's Cargo.toml names its [lib]"
    old_lib = template_lib.group(1)
    old_pkg = old_lib.replace("_", "-")
    for name in ("Cargo.toml", "Cargo.lock"):
        text = (TEMPLATE / name).read_text(encoding="utf-8")
        text = text.replace(f'"{old_pkg}"', f'"{CRATE_LIB.replace("_", "-")}"').replace(
            f'"{old_lib}"', f'"{CRATE_LIB}"'
        )
        (dst / name).write_text(text.replace('path = "../../', f'path = "{ROOT}/'), encoding="utf-8")
    source, _ = guide_kernels()
    (dst / "src").mkdir()
    (dst / "src" / "lib.rs").write_text(
        "//! The kernels of docs/kernel-authoring.md's example (a throwaway crate).\n\n"
        f"use nki_core::prelude::*;\n\nnki_python::nki_module!({CRATE_LIB});\n\n{source}",
        encoding="utf-8",
    )
    return dst


class Repo:
    """The guide's commands, each as this suite runs it, on copies of the committed artifacts."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.crate = make_crate(tmp / "crate")
        self.fixtures = tmp / "fixtures"
        shutil.copytree(FIXTURES, self.fixtures)
        self.ops_md = tmp / "ops.md"
        shutil.copy2(OPS_MD, self.ops_md)
        self.monkeypatch = monkeypatch
        self.generate = generator()
        self.module: plugins.LoadedModule | None = None
        self.ran: list[str] = []
        self.actions: dict[str, Callable[[], None]] = {
            "cargo test -p nki-kernels": self.unit_tests,
            "maturin develop --release -m python/Cargo.toml": self.rebuild,
            "python tests/reference/generate.py": self.regenerate_fixtures,
            "torch-nki table -o docs/ops.md": self.regenerate_table,
            "INSTA_UPDATE=always cargo test -p nki-tests": self.rust_snapshots,
            "git diff tests/ docs/ops.md": self.review,
            "bash scripts/test.sh": self.ci,
        }

    def run(self, step: str) -> None:
        action = self.actions.get(step)
        assert action is not None, f"docs/kernel-authoring.md has a step this suite does not know: {step!r}"
        action()
        self.ran.append(step)

    def _cargo(self, *args: str) -> None:
        env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir())}
        cmd = ["cargo", *args, "--manifest-path", str(self.crate / "Cargo.toml")]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}"

    def unit_tests(self) -> None:
        # The crate's own tests (release: the profile whose dependencies are already built).
        self._cargo("test", "--release")

    def rebuild(self) -> None:
        self.monkeypatch.setenv("CARGO_TARGET_DIR", str(target_dir()))
        self.module = torch_nki.load(plugins.build(self.crate), namespace="neuron")
        # What linking the kernel into torch_nki._native does for the suites that iterate it.
        real = testing.ops_with_reference
        added = sorted(op for op in self.module.ops if testing.op_spec(op).reference)
        self.monkeypatch.setattr(testing, "ops_with_reference", lambda: sorted({*real(), *added}))

    def regenerate_fixtures(self) -> None:
        assert self.generate.main(["--out", str(self.fixtures)]) == 0

    def regenerate_table(self) -> None:
        assert cli.main(["table", "-o", str(self.ops_md)]) == 0

    def rust_snapshots(self) -> None:
        """Not run: see the module docstring."""

    def stale(self) -> list[str]:
        """The checks CI runs on these artifacts that fail now."""
        failing = []
        if self.generate.main(["--check", "--out", str(self.fixtures)]) != 0:
            failing.append("fixtures")
        from torch_nki import optable

        if optable.markdown() != self.ops_md.read_text(encoding="utf-8"):
            failing.append("ops.md")
        return failing

    def ci(self) -> None:
        assert self.stale() == [], "the guide's steps leave artifacts stale"

    def review(self) -> None:
        """Only what is about the new kernel changed."""
        assert self.module is not None
        new = tuple(self.module.ops)
        before = {p.name: p.read_bytes() for p in FIXTURES.iterdir()}
        after = {p.name: p.read_bytes() for p in self.fixtures.iterdir()}
        assert set(before) <= set(after), f"fixtures removed: {sorted(set(before) - set(after))}"
        added = sorted(set(after) - set(before))
        assert added, "no fixtures for the new kernel: generate.py did not run after the rebuild"
        assert all(n.startswith(new) for n in added), f"fixtures added for other kernels: {added}"
        # As `generate.py --check` compares: another machine's ATen may sum in another order.
        same = self.generate.within_reordering
        changed = sorted(n for n in before if before[n] != after[n] and not same(n, before[n], after[n]))
        assert changed == ["cases.json"], f"other kernels' fixtures changed: {changed}"

        def other_cases(files: dict[str, bytes]) -> list[object]:
            return [c for c in json.loads(files["cases.json"])["cases"] if c["op"] not in new]

        assert other_cases(before) == other_cases(after), "cases.json changed for other kernels"
        old_rows = OPS_MD.read_text(encoding="utf-8").splitlines()
        new_rows = self.ops_md.read_text(encoding="utf-8").splitlines()
        assert set(old_rows) <= set(new_rows), "docs/ops.md lost rows"
        extra = [r for r in new_rows if r not in old_rows]
        assert extra, "docs/ops.md has no row for the new kernel: the table was not made after the rebuild"
        ours = tuple(f"| `{op}` |" for op in new)
        assert all(r.startswith(ours) for r in extra), f"other rows of docs/ops.md changed: {extra}"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Repo]:
    if shutil.which("cargo") is None:
        pytest.skip("needs cargo to build the throwaway crate")
    repo = Repo(tmp_path, monkeypatch)
    yield repo
    if repo.module is not None:
        plugins.unload(repo.module)
    assert not any(op.startswith("scale_rows") for op in torch_nki.ops())


def test_the_guides_steps_make_a_new_kernel_pass(repo: Repo) -> None:
    steps = guide_steps()
    rebuild = steps.index("maturin develop --release -m python/Cargo.toml")
    for step in steps[: rebuild + 1]:
        repo.run(step)
    assert repo.module is not None and set(repo.module.ops) >= set(BODIES)
    # The new kernel makes every generated artifact stale: leaving out the step that
    # regenerates one fails CI.
    assert repo.stale() == ["fixtures", "ops.md"]
    for step in steps[rebuild + 1 :]:
        repo.run(step)
    assert repo.ran == steps

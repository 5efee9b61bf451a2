"""A swapped transformers Llama trained on several processes (gloo): FSDP2 and tensor
parallelism on 2 (tensor parallelism also under ``torch.compile``), both on a 2 x 2 mesh on 4
(a smoke test), give the single-process run's losses and gradients.

Each run is ``distributed_llama.py`` in fresh processes (rendezvous on a free local port),
bounded in time; the single-process run of the same script is the reference.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("transformers")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("needs torch.distributed with gloo", allow_module_level=True)

SCRIPT = Path(__file__).resolve().parent / "distributed_llama.py"
TIMEOUT = 300
WORLD = {"fsdp": 2, "tp": 2, "tp-compiled": 2, "2d": 4}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(mode: str, out: Path) -> dict[str, Any]:
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), OMP_NUM_THREADS="1")
    ranks = [None] if mode == "single" else list(range(WORLD[mode]))
    procs = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), mode, str(out), *([] if r is None else [str(r), str(WORLD[mode])])],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in ranks
    ]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=TIMEOUT)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs, strict=False):
        assert p.returncode == 0, f"{mode}: a process exited with {p.returncode}:\n{log}"
    result: dict[str, Any] = torch.load(out)
    return result


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run("single", tmp_path_factory.mktemp("llama") / "single.pt")


@pytest.mark.parametrize("mode", sorted(WORLD))
def test_two_process_training_matches_one_process(mode: str, single: dict[str, Any], tmp_path: Path) -> None:
    got = _run(mode, tmp_path / f"{mode}.pt")
    # FSDP2 all-gathers parameters before each layer runs: the kernels see plain tensors. Under
    # tensor parallelism the swapped linears get DTensor weights and the sequence-parallel norms
    # DTensor rows, forward and backward.
    tensor_parallel = ["linear", "linear_backward", "rmsnorm", "rmsnorm_backward"]
    expected = [] if mode == "fsdp" else tensor_parallel
    assert got["sharded"] == expected
    assert len(got["losses"]) == len(single["losses"])
    torch.testing.assert_close(
        torch.tensor(got["losses"]), torch.tensor(single["losses"]), rtol=1e-4, atol=1e-4
    )
    assert got["grads"].keys() == single["grads"].keys()
    for name, g in got["grads"].items():
        torch.testing.assert_close(
            g, single["grads"][name], rtol=1e-3, atol=1e-4, msg=lambda m, n=name: f"{mode} grad {n}: {m}"
        )

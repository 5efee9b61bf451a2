"""What holds today stays held: a fork after parallel ops, threads inside ops at once, and
dynamic-shape recompiles."""

import os
import threading

import torch

import torch_nki  # noqa: F401


def parallel_add() -> bool:
    x = torch.arange(256 * 8, dtype=torch.float32).reshape(256, 8)
    return bool(torch.equal(torch.ops.neuron.add(x, x), x + x))


assert parallel_add()
pid = os.fork()
if pid == 0:
    os._exit(0 if parallel_add() else 1)
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status

results: list[bool] = []
threads = [threading.Thread(target=lambda: results.append(parallel_add())) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert results == [True] * 4

f = torch.compile(lambda a, w: torch.ops.neuron.rmsnorm(a, w), dynamic=True, fullgraph=True, backend="eager")
for rows, d in ((3, 16), (5, 16), (7, 32)):
    a, w = torch.randn(rows, d), torch.randn(d)
    torch.testing.assert_close(f(a, w), torch.ops.neuron.rmsnorm(a, w))
print("OK")

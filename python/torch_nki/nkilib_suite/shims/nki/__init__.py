"""``import nki``: torch-nki's frontend, with the simulator package's module tree (see ../README.md)."""

from torch_nki.nkilib_suite._interface import alias

alias("nki_cpu_simulator")

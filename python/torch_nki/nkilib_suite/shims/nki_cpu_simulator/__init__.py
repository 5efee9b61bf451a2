"""AWS's NKI CPU simulator package, served by torch-nki (see ../README.md)."""

from torch_nki.nkilib_suite._interface import install

nki = install(__name__)

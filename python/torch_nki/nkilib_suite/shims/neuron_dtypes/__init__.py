"""``neuron_dtypes``: torch-nki's stand-in (see ../README.md)."""

from torch_nki.nkilib_suite._neuron_dtypes import *  # noqa: F403
from torch_nki.nkilib_suite._neuron_dtypes import static_cast as static_cast

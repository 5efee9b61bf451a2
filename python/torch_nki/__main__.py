"""``python -m torch_nki``: the ``torch-nki`` command line."""

import sys

from torch_nki.cli import main

sys.exit(main())

"""``python -m gpu_engine.cli``: the ``gpu-engine`` command."""

import sys

from . import main

sys.exit(main())

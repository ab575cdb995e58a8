"""``python -m cudarl.cli``: the same as the ``cudarl`` command."""

import sys

from cudarl.cli.main import main

sys.exit(main())

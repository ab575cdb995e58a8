"""``python -m cudarl.cli``: the same as the ``cudarl`` command."""

from cudarl.cli.main import main

import sys

sys.exit(main())

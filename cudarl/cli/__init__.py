"""The ``cudarl`` command: ``main`` (eval, config and the sub-commands), ``tasks``, ``tester``,
and ``table`` (verdict tables). Run it as ``cudarl ...`` or ``python -m cudarl.cli ...``."""

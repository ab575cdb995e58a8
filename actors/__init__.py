"""Ray actors: thin wrappers that give the library's classes (``cudarl``) a place in the cluster.

Each module defines a plain class (testable without a cluster) and applies ``ray.remote`` at
the bottom; the logic stays in ``cudarl``.
"""

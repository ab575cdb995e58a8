"""Tasks: KernelBench-format references with metadata, and their loaders."""

from cudarl.tasks.task import Task, TaskError
from cudarl.tasks.loaders import load_tasks

__all__ = ["Task", "TaskError", "load_tasks"]

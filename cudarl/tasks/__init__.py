"""Tasks: KernelBench-format references with metadata, and their loaders."""

from cudarl.tasks.loaders import load_tasks
from cudarl.tasks.task import Task, TaskError

__all__ = ["Task", "TaskError", "load_tasks"]

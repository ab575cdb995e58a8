"""The service's request checks: exactly one source, size and budget limits, a program that does
not parse or lacks the KernelBench names, an unknown task id, each refused with one line."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cudarl.serve.schemas import MAX_PROGRAM_BYTES, OptimizeRequest, RequestError
from cudarl.tasks.builtin import load_suite

SUITE = {task.id: task for task in load_suite()}
PROGRAM = SUITE["vector_add"].source


def test_a_program_or_a_task_id_gives_the_task():
    assert OptimizeRequest(task_id="vector_add").task(SUITE) is SUITE["vector_add"]
    task = OptimizeRequest(reference=PROGRAM, budget={"turns": 1, "seconds": 30}).task(SUITE)
    assert task.source == PROGRAM and task.id == "request"


@pytest.mark.parametrize("body, message", [
    ({}, "exactly one of 'reference'"),
    ({"reference": PROGRAM, "task_id": "vector_add"}, "exactly one of 'reference'"),
    ({"task_id": "vector_add", "budget": {"turns": 0}}, "greater than or equal to 1"),
    ({"task_id": "vector_add", "budget": {"seconds": 10_000}}, "less than or equal to 1800"),
    ({"task_id": "vector_add", "extra": 1}, "Extra inputs are not permitted"),
    ({"reference": "x" * (MAX_PROGRAM_BYTES + 1)}, f"at most {MAX_PROGRAM_BYTES} characters"),
])
def test_malformed_requests_are_refused_by_the_record(body, message):
    with pytest.raises(ValidationError, match=message):
        OptimizeRequest.model_validate(body)


@pytest.mark.parametrize("body, message", [
    ({"task_id": "no_such_task"}, "unknown task_id 'no_such_task' (known: "),
    ({"reference": "def broken(:\n"}, "reference does not parse: line 1"),
    ({"reference": "import torch\nclass Model: pass\n"}, "reference lacks get_inputs, get_init_inputs"),
    ({"reference": "\u00e9" * (MAX_PROGRAM_BYTES // 2 + 1)}, "bytes; at most"),  # few characters, many bytes
])
def test_requests_that_name_nothing_usable_are_refused_in_one_line(body, message):
    with pytest.raises(RequestError, match=message.replace("(", r"\(")) as caught:
        OptimizeRequest.model_validate(body).task(SUITE)
    assert "\n" not in str(caught.value)

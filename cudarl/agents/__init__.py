"""Agents: the text around the policy. Prompts for the generator and optimizer roles (templates in
``cudarl/prompts/``), parsing a model's answer into a candidate, and a verdict as model-facing
feedback.

These modules are light on purpose (no torch, no Ray): rollout workers, the data pipeline and
tests import them without a GPU stack. The episode loop and trajectories live beside them.
"""

from cudarl.agents.feedback import feedback_text
from cudarl.agents.parsing import ParsedAnswer, format_error_verdict, parse_answer
from cudarl.agents.prompts import TurnSummary, generator_prompt, optimizer_prompt, summarize_turn, system_prompt

__all__ = [
    "ParsedAnswer",
    "TurnSummary",
    "feedback_text",
    "format_error_verdict",
    "generator_prompt",
    "optimizer_prompt",
    "parse_answer",
    "summarize_turn",
    "system_prompt",
]

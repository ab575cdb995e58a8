"""Reading a model's answer: which code is the candidate, in which format, and what was said around it.

Policies answer in prose with code in it, often several blocks (the reference repeated, then
the kernel), sometimes with the last fence cut off by the token limit or with no fences at all.
A reward must not punish a well-formed kernel for its wrapping, and an answer with no usable
candidate must become a ``format_error`` verdict, never an exception in a rollout worker.

Covered: ``<think>`` reasoning (closed, an orphan ``</think>`` whose opening was in the prompt,
an unclosed ``<think>`` cut off by the token limit); fenced blocks with backticks or tildes,
labelled ``python``/``py``/``python3`` or unlabelled, preferred over blocks labelled otherwise;
several blocks (the last one that defines ``ModelNew`` wins); an unclosed final fence; a bare
answer, or bare code with prose before and after it; the form (inline or nvrtc) decided the
way the tester's guard decides it; a one-line ``Strategy:`` summary.
Not covered: code split across several blocks that only works when joined (the last complete
block is taken); whether the candidate is any good (the tester judges that).
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from typing import Literal

from cudarl.tester.verdict import Outcome, Stage, Verdict

Form = Literal["inline", "nvrtc"]

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^`\n]*$")
_PYTHON_LABELS = {"", "python", "py", "python3", "py3", "{python}", "{.python}"}
_MENTIONS_MODEL = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.M)
_CODE_START = re.compile(r"^(?:import\s|from\s+\S+\s+import\s|class\s|def\s|@|[A-Za-z_]\w*\s*=)")
_STRATEGY = re.compile(r"^[ \t>*#_-]*\**[ \t]*strategy[ \t]*\**[ \t]*[:\uff1a][ \t]*\**[ \t]*(.+)$", re.I | re.M)
_MAX_STRATEGY = 200
_BARE_TRIES = 40  # trailing lines dropped one at a time when bare code is followed by prose


@dataclass(frozen=True)
class ParsedAnswer:
    """One answer read: ``source`` is None exactly when ``problem`` says why nothing was usable."""

    source: str | None
    form: Form | None
    reasoning: str  # the answer's prose: everything outside the chosen code and the <think> block
    problem: str
    strategy: str

    @property
    def ok(self) -> bool:
        return self.source is not None


@dataclass(frozen=True)
class _Block:
    label: str
    code: str
    start: int  # character span of the whole block (fences included) in the visible text
    end: int


def _strip_thinking(text: str) -> str:
    """The visible answer: ``<think>`` blocks removed with plain ``find`` (a regex would go
    quadratic on many unclosed tags)."""
    closing = text.rfind("</think>")
    if closing >= 0 and text.find("<think>", 0, closing) < 0:
        text = text[closing + len("</think>"):]  # the opening tag was part of the prompt
    parts: list[str] = []
    position = 0
    while (opening := text.find("<think>", position)) >= 0:
        parts.append(text[position:opening])
        closing = text.find("</think>", opening)
        if closing < 0:
            position = len(text)  # cut off while thinking: nothing after it was answered
            break
        position = closing + len("</think>")
    parts.append(text[position:])
    return "".join(parts).replace("</think>", "")


def _blocks(text: str) -> list[_Block]:
    """Fenced blocks, scanned line by line; a block left open runs to the end of the answer."""
    found: list[_Block] = []
    lines = text.splitlines(keepends=True)
    offset = 0
    opened: tuple[str, str, int, int] | None = None  # fence, label, block start, code start
    for line in lines:
        match = _FENCE.match(line.rstrip("\r\n"))
        if opened is None:
            if match:
                opened = (match.group(1), match.group(2).lower(), offset, offset + len(line))
        elif match and match.group(1)[0] == opened[0][0] and len(match.group(1)) >= len(opened[0]) \
                and not match.group(2) and line.strip() == match.group(1):
            found.append(_Block(opened[1], text[opened[3]:offset], opened[2], offset + len(line)))
            opened = None
        offset += len(line)
    if opened is not None:
        found.append(_Block(opened[1], text[opened[3]:], opened[2], len(text)))
    return found


def _parse(code: str) -> tuple[ast.Module | None, str]:
    try:
        return ast.parse(code), ""
    except SyntaxError as exc:
        return None, f"SyntaxError line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return None, f"{type(exc).__name__}: {exc}"


def _defines_model(tree: ast.Module) -> bool:
    """As the guard reads it: a module-level class (or name) ``ModelNew``."""
    return any((isinstance(node, ast.ClassDef) and node.name == "ModelNew")
               or (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew"
                                                        for t in node.targets))
               for node in tree.body)


def detect_form(tree: ast.Module) -> Form | None:
    """``inline`` when ``load_inline`` is used, else ``nvrtc`` when ``cudarl.nvrtc`` is, else None.
    The guard builds a source using both as inline, so the same order holds here."""
    inline = nvrtc = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "load_inline":
            inline = True
        elif isinstance(node, ast.Attribute) and node.attr == "load_inline":
            inline = True
        elif isinstance(node, ast.alias) and node.name == "load_inline":
            inline = True
        elif isinstance(node, ast.ImportFrom) and node.module and (
                node.module.startswith("cudarl.nvrtc")
                or (node.module == "cudarl" and any(a.name == "nvrtc" for a in node.names))):
            nvrtc = True
        elif isinstance(node, ast.Import) and any(a.name.startswith("cudarl.nvrtc") for a in node.names):
            nvrtc = True
    return "inline" if inline else "nvrtc" if nvrtc else None


def _strategy(*texts: str) -> str:
    for text in texts:
        if match := _STRATEGY.search(text):
            line = match.group(1).strip().strip("*_` ").strip()
            if line:
                return line if len(line) <= _MAX_STRATEGY else line[:_MAX_STRATEGY - 3].rstrip() + "..."
    return ""


def _bare_code(text: str) -> tuple[str, ast.Module] | None:
    """Code written without fences: the whole answer, or, between prose, from the first line that
    starts like Python, dropping trailing lines until it parses (a bounded number of tries)."""
    tree, _ = _parse(text)
    if tree is not None and _defines_model(tree):
        return text.strip("\n"), tree
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return None
    for end in range(len(lines), max(start, len(lines) - _BARE_TRIES), -1):
        code = "\n".join(lines[start:end]).strip("\n")
        tree, _ = _parse(code)
        if tree is not None and _defines_model(tree):
            return code, tree
    return None


def _found(visible: str, code: str, tree: ast.Module, span: tuple[int, int]) -> ParsedAnswer:
    code = code.strip("\n") + "\n"
    reasoning = (visible[:span[0]].rstrip() + "\n\n" + visible[span[1]:].lstrip()).strip()
    return ParsedAnswer(code, detect_form(tree), reasoning, "", _strategy(reasoning, code))


def _failed(visible: str, problem: str) -> ParsedAnswer:
    return ParsedAnswer(None, None, visible.strip(), problem, _strategy(visible))


def parse_answer(text: str) -> ParsedAnswer:
    """The candidate in a model's answer, or the reason there is none. Never raises."""
    if not isinstance(text, str):
        return ParsedAnswer(None, None, "", f"the answer is a {type(text).__name__}, not text", "")
    had_thinking = "<think>" in text or "</think>" in text
    visible = _strip_thinking(text.replace("\r\n", "\n"))
    if not visible.strip():
        return _failed("", "the answer has no text outside its <think> reasoning" if had_thinking
                       else "the answer is empty")
    blocks = _blocks(visible)
    python = [b for b in blocks if b.label in _PYTHON_LABELS]
    others = [b for b in blocks if b.label not in _PYTHON_LABELS]  # python code labelled otherwise
    unparsed: tuple[_Block, str] | None = None
    for group in (python, others):
        for block in reversed(group):
            tree, error = _parse(block.code)
            if tree is not None and _defines_model(tree):
                return _found(visible, block.code, tree, (block.start, block.end))
            if tree is None and unparsed is None and _MENTIONS_MODEL.search(block.code):
                unparsed = (block, error)
    if unparsed is not None:
        return _failed(visible, f"the code does not parse: {unparsed[1]}")
    if blocks:
        return _failed(visible, "no code block defines class ModelNew")
    if bare := _bare_code(visible):
        code, tree = bare
        start = visible.find(code.splitlines()[0])
        return _found(visible, code, tree, (start, start + len(code)))
    if _MENTIONS_MODEL.search(visible):
        _, error = _parse(visible)
        return _failed(visible, f"the code does not parse: {error or 'no fenced code block and prose around it'}")
    return _failed(visible, "the answer has no code block and no class ModelNew")


def format_error_verdict(task_id: str, candidate_id: str, problem: str, answer: str = "") -> Verdict:
    """The verdict for an answer with no usable candidate: the reward and the statistics treat it
    like any failed candidate, so nothing downstream needs a special case. The hash is the
    answer's (there is no source), so identical broken answers count as one."""
    digest = hashlib.sha256(answer.encode("utf-8", "replace")).hexdigest()
    verdict = Verdict.begin(task_id, candidate_id, digest)
    return verdict.conclude(Outcome.FORMAT_ERROR, problem or "the answer has no usable candidate", stage=Stage.GUARD)

"""Messages to token ids with the model's own chat template, and feedback appended as tokens.

Why this is its own module: the one place text becomes tokens in an episode. A turn's prompt is
rendered and tokenized once, before the engine sees it; generated tokens are never decoded and
re-encoded. In the ``full`` context mode the next turn's prompt is the previous prompt, the
engine's response ids, and the tokens that close the assistant's message and carry the user's
feedback: those are found by rendering a conversation with a marker as the assistant's message
and taking the text the template puts after it, so any template works (ChatML, Llama, ...).
Covered: templates that render an assistant message as its content followed by a closing text.
Not covered: templates that rewrite earlier assistant messages (e.g. drop their reasoning) when
a new message is added: in ``full`` mode those are exactly what must not be re-rendered.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

_MARKER = "cudarl-assistant-marker-5c1e"


class ChatTokens:
    """One tokenizer's chat format."""

    def __init__(self, tokenizer) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat template; set tokenizer.chat_template")
        self.tokenizer = tokenizer
        self.eos_text = tokenizer.decode([tokenizer.eos_token_id]) if tokenizer.eos_token_id is not None else ""

    def _text(self, messages: list[dict], open_assistant: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=open_assistant, tokenize=False)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt(self, system: str, user: str) -> list[int]:
        """A fresh conversation, ready for the assistant's answer."""
        return self.encode(self._text([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                      open_assistant=True))

    @functools.cached_property
    def _assistant_end(self) -> tuple[list[dict], str, str]:
        """(a conversation ending on a marker assistant message, its rendered text, the text the
        template closes an assistant message with): the same for every feedback, found once."""
        head = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": _MARKER}]
        closed = self._text(head, open_assistant=False)
        if _MARKER not in closed:
            raise ValueError("the chat template drops assistant messages; full context mode cannot use it")
        return head, closed, closed[closed.index(_MARKER) + len(_MARKER):]

    def feedback(self, user: str, response_ids: Sequence[int]) -> list[int]:
        """Tokens to append after the engine's ``response_ids``: the rest of the assistant's
        closing (the end-of-turn token itself when the response stopped before it) and a user
        message, ready for the next answer."""
        head, closed, closing = self._assistant_end
        follow = self._text(head + [{"role": "user", "content": user}], open_assistant=True)
        if not follow.startswith(closed):
            raise ValueError("the chat template re-renders earlier messages; full context mode cannot use it")
        tail = follow[len(closed):]
        ended_on_eos = bool(response_ids) and response_ids[-1] == self.tokenizer.eos_token_id
        if ended_on_eos and self.eos_text and closing.startswith(self.eos_text):
            closing = closing[len(self.eos_text):]  # the engine already produced the end-of-turn token
        return self.encode(closing + tail)

    def decode(self, token_ids: Sequence[int]) -> str:
        """The response as text, for parsing only (never encoded again)."""
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

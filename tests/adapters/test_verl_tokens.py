"""Incremental tokenisation (adapters/verl/tokens.py) against VERL's continuous-token builder:
the same ids for any observation text, one render instead of two, VERL's path wherever the
shortcut cannot be shown equal."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teamgym.adapters.verl import tokens

pytest.importorskip("verl")

from verl.utils.tokenizer.continuous_token import ContinuousTokenBuilder
from verl.utils.tokenizer.continuous_token_wiring import (
    create_continuous_token_builder,
)

TEXT = st.lists(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
    | st.sampled_from(["<|im_start|>", "<|im_end|>", "\n", " ", "user", "assistant"]),
    max_size=6,
).map("".join)
"""Observation text: any characters, with the template's own markers and words mixed in."""


@pytest.fixture
def builder(templated):
    """VERL's builder for the local model's tokenizer, or one carrying Qwen2.5's template (the
    local model is a ``qwen2``: VERL picks its Qwen builder)."""
    _, tokenizer = templated
    return create_continuous_token_builder(tokenizer, hf_model_type="qwen2")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=TEXT)
def test_an_observation_gets_the_ids_verls_builder_gives(builder, content) -> None:
    message = {"role": "user", "content": content}
    ids = tokens.observation_ids(builder, message)
    expected = builder._tokenize_single_non_tool(message, add_generation_prompt=True)
    if ids is None:  # only when the suffix does not start at the template's boundary token
        text = builder.tokenizer.apply_chat_template(
            [*tokens._PREFIX, message], tokenize=False, add_generation_prompt=True
        )
        template = tokens._template(builder)
        assert template is not None
        assert not text[len(template.prefix) :].startswith(template.boundary)
    else:
        assert ids == expected


def test_the_shortcut_serves_the_observations_the_envs_write(builder, tokenizer) -> None:
    """For the templates we ship tests for, real observations take the one-render path."""
    from teamgym.envs import make

    env = make("signal-v1")
    observations, _ = env.reset(seed=3)
    for text in observations.values():
        message = {"role": "user", "content": text}
        ids = tokens.observation_ids(builder, message)
        assert ids is not None
        assert ids == builder._tokenize_single_non_tool(message, add_generation_prompt=True)


def test_a_builder_that_changes_the_hooks_gets_verls_path(tokenizer) -> None:
    class Custom(ContinuousTokenBuilder):
        def _tokenize_single_non_tool(self, message, **kw):  # a model family's own rendering
            return [1, 2, 3]

    message = {"role": "user", "content": "hello"}
    assert tokens.observation_ids(Custom(tokenizer), message) is None
    assert tokens.observation_ids(ContinuousTokenBuilder(tokenizer), message) is not None
    assert tokens.observation_ids(ContinuousTokenBuilder(tokenizer), {"role": "tool"}) is None


def test_a_template_without_a_special_boundary_gets_verls_path(model_dir, tmp_path) -> None:
    """A plain-text template (turns separated by words, not added tokens): the suffix would
    tokenise differently alone, so the probe refuses the shortcut."""
    import shutil

    from transformers import AutoTokenizer

    copy = tmp_path / "plain-template"
    shutil.copytree(model_dir, copy)
    (copy / "chat_template.jinja").write_text(
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    builder = ContinuousTokenBuilder(AutoTokenizer.from_pretrained(copy))
    message = {"role": "user", "content": "the target is green"}
    assert tokens.observation_ids(builder, message) is None


def test_the_first_prompt_is_rendered_once_per_conversation(builder) -> None:
    calls = []
    original = builder.build_initial_tokens

    def counting(messages, **kw):
        calls.append(1)
        return original(messages, **kw)

    builder.build_initial_tokens = counting
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "obs 1"}]
    first = tokens.first_prompt_ids(builder, messages)
    again = tokens.first_prompt_ids(builder, [dict(m) for m in messages])
    other = tokens.first_prompt_ids(builder, [*messages[:1], {"role": "user", "content": "obs 2"}])
    assert first == again == original(messages) and other != first
    assert len(calls) == 2
    again.append(-1)  # callers get their own list
    assert tokens.first_prompt_ids(builder, messages) == first


def test_a_builder_that_refuses_user_messages_gets_verls_path(tokenizer) -> None:
    """VERL's builder refuses roles outside ``allowed_append_roles``; the shortcut defers."""
    builder = ContinuousTokenBuilder(tokenizer, allowed_append_roles=["tool"])
    assert tokens.observation_ids(builder, {"role": "user", "content": "hello"}) is None

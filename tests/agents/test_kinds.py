"""The agent-kind registry: each kind declares its options, defaults, label and builder once,
and specs are parsed, checked and built from that declaration alone."""

from __future__ import annotations

import warnings
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import pytest

from teamgym.adapters.agents import kinds
from teamgym.adapters.agents.builtin import DefaultURLWarning
from teamgym.adapters.agents.chat import SamplingOptions
from teamgym.adapters.agents.kinds import (
    AgentKind,
    AgentSpec,
    agent_kinds,
    build_agent,
    get_agent_kind,
    parse_agent_spec,
    register_agent_kind,
)

SAMPLING = [f.name for f in fields(SamplingOptions)]
MINIMAL = {"baseline": "random", "openai": "m", "transformers": "some/dir", "human": "alice"}
"""A value of each shipped kind's required option."""


def test_the_shipped_kinds_are_registered_in_order() -> None:
    assert agent_kinds() == ("baseline", "openai", "transformers", "human")
    for name in agent_kinds():
        kind = get_agent_kind(name)
        assert kind.name == name
        assert kind.options == (kind.required, *kind.defaults)
        assert kind.reach <= set(kind.defaults), f"{name}: reach names options it lacks"


@pytest.mark.parametrize("name", ["openai", "transformers"])
def test_llm_kinds_take_the_sampling_options_with_one_set_of_defaults(name: str) -> None:
    defaults = get_agent_kind(name).defaults
    assert {k: defaults[k] for k in SAMPLING} == asdict(SamplingOptions())
    assert not set(SAMPLING) & get_agent_kind(name).reach, "sampling changes the fingerprint"


@pytest.mark.parametrize("name", ["baseline", "openai", "transformers", "human"])
def test_every_declared_option_parses_and_the_default_label_is_the_string_form(
    name: str,
) -> None:
    """The default label is the string form, but for a model directory, labelled by its name
    (tests/benchmarks/test_choices.py)."""
    kind = get_agent_kind(name)
    spec = parse_agent_spec({"kind": name, kind.required: MINIMAL[name], **kind.defaults})
    assert spec.kind == name and set(spec.options) == set(kind.options)
    string = f"{kind.prefix}{spec.options[kind.required]}"
    assert spec.label == ("transformers:dir" if name == "transformers" else string)
    assert (
        parse_agent_spec(string).config()
        == parse_agent_spec({"kind": name, kind.required: MINIMAL[name]}).config()
    )


@pytest.mark.parametrize("name", ["baseline", "openai", "transformers"])
def test_an_unknown_option_names_the_kinds_options(name: str) -> None:
    kind = get_agent_kind(name)
    allowed = ", ".join(kind.options)
    with pytest.raises(ValueError) as caught:
        parse_agent_spec({"kind": name, kind.required: MINIMAL[name], "temp": 1})
    assert str(caught.value) == (
        f"agent kind {name!r} has no option(s) temp; allowed: label, {allowed}"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"kind": "gpt"},
            "unknown agent kind 'gpt'; allowed: baseline, openai, transformers, human",
        ),
        ({"kind": "openai"}, "agent kind 'openai' needs 'model'"),
        ({"kind": "transformers", "device": "cpu"}, "agent kind 'transformers' needs 'path'"),
        ({"label": "x"}, "agent kind 'baseline' needs 'name'"),
        ("  ", "empty agent spec"),
        (3, "an agent is a name or a mapping, got int: 3"),
    ],
)
def test_bad_specs_say_what_is_allowed(spec: Any, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_agent_spec(spec)
    assert str(caught.value) == message


def test_option_falls_back_to_the_kinds_default() -> None:
    spec = parse_agent_spec({"kind": "openai", "model": "m", "timeout": 5})
    assert spec.option("timeout") == 5
    assert spec.option("concurrency") == get_agent_kind("openai").defaults["concurrency"]
    assert spec.option("base_url") == "http://127.0.0.1:8000/v1"
    with pytest.raises(KeyError):
        spec.option("device")


def test_how_an_agent_is_reached_never_changes_its_config() -> None:
    plain = parse_agent_spec("openai:m")
    reached = parse_agent_spec(
        {"kind": "openai", "model": "m", "base_url": "http://h:1/v1", "concurrency": 2}
    )
    assert plain.config() == reached.config() == {"kind": "openai", "model": "m"}
    assert parse_agent_spec({"kind": "openai", "model": "m", "seed": 1}).config() != plain.config()


def test_string_forms_are_completed_as_mappings_are(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_agent_spec("openai:m@http://h:1/v1").options == {
        "model": "m",
        "base_url": "http://h:1/v1",
    }
    assert parse_agent_spec("transformers:model").options["path"] == str(tmp_path / "model")
    assert parse_agent_spec("checkpoint:policy").options["name"] == f"checkpoint:{tmp_path}/policy"
    assert parse_agent_spec("expert").options == {"name": "expert"}


def test_a_taken_kind_name_is_refused() -> None:
    with pytest.raises(ValueError, match="'openai' is already registered"):
        register_agent_kind(get_agent_kind("openai"))


def test_a_registered_kind_is_parsed_labelled_and_built_from_its_declaration(
    monkeypatch,
) -> None:
    monkeypatch.setattr(kinds, "_KINDS", dict(kinds._KINDS))
    built: list[tuple[AgentSpec, str]] = []

    def build(spec: AgentSpec, env_id: str) -> Any:
        built.append((spec, env_id))
        return "agent"

    register_agent_kind(AgentKind("echo", "text", {"loud": False}, "echo:", build))
    spec = parse_agent_spec("echo:hi")
    assert (spec.kind, spec.label, spec.options) == ("echo", "echo:hi", {"text": "hi"})
    assert spec.option("loud") is False
    assert build_agent(spec, "signal-v0") == "agent" and built == [(spec, "signal-v0")]
    with pytest.raises(ValueError, match="allowed: label, text, loud"):
        parse_agent_spec({"kind": "echo", "text": "hi", "quiet": True})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"temperature": -1}, "temperature >= 0"),
        ({"top_p": 0}, "0 < top_p <= 1"),
        ({"top_p": 1.5}, "0 < top_p <= 1"),
        ({"max_tokens": 0}, "max_tokens >= 1"),
    ],
)
def test_sampling_options_out_of_range_are_refused_naming_the_agent(
    options: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        SamplingOptions.from_options(options, "my-agent")
    assert str(caught.value).startswith("my-agent: ")


def test_sampling_options_convert_what_a_spec_sets() -> None:
    assert SamplingOptions.from_options({}, "a") == SamplingOptions()
    parsed = SamplingOptions.from_options({"temperature": "0.5", "max_tokens": 8.0, "seed": 3}, "a")
    assert parsed == SamplingOptions(temperature=0.5, top_p=1.0, max_tokens=8, seed=3)


def test_the_openai_agent_reads_its_kinds_defaults() -> None:
    pytest.importorskip("httpx")
    from teamgym.adapters.agents.openai_agent import OpenAIAgent

    agent = build_agent(parse_agent_spec("openai:m"), "signal-v0")
    assert isinstance(agent, OpenAIAgent)
    defaults = get_agent_kind("openai").defaults
    assert agent.base_url == defaults["base_url"].rstrip("/")
    assert (agent.concurrency, agent.timeout, agent.max_retries, agent.backoff) == (
        defaults["concurrency"],
        defaults["timeout"],
        defaults["max_retries"],
        defaults["backoff"],
    )
    assert agent.sampling == SamplingOptions() and agent.api_key_env is None
    agent.close()


def test_the_transformers_agent_reads_its_kinds_defaults(model_dir: Path) -> None:
    from teamgym.adapters.agents.transformers_agent import TransformersAgent

    agent = build_agent(parse_agent_spec(f"transformers:{model_dir}"), "signal-v0")
    assert isinstance(agent, TransformersAgent)
    defaults = get_agent_kind("transformers").defaults
    assert agent.max_prompt_tokens == defaults["max_prompt_tokens"]
    assert agent.sampling == SamplingOptions()
    assert defaults["device"] == "auto" and agent.model.device in ("cpu", "cuda")
    agent.close()


def test_the_default_server_is_said_not_silent() -> None:
    """Issue 27: ``openai:x`` quietly meant ``http://127.0.0.1:8000/v1``; the default stays (it
    is where ``vllm serve`` and ``teamgym serve`` listen) and is said once, naming the URL."""
    default = get_agent_kind("openai").defaults["base_url"]
    for spec in ("openai:x", {"kind": "openai", "model": "x"}):
        with pytest.warns(DefaultURLWarning) as caught:
            parsed = parse_agent_spec(spec)
        assert parsed.options["base_url"] == default
        [notice] = caught
        assert default in str(notice.message) and "openai:x@URL" in str(notice.message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_agent_spec("openai:x@http://127.0.0.1:8000/v1")
        parse_agent_spec({"kind": "openai", "model": "x", "base_url": "https://h/v1"})


@pytest.mark.parametrize(
    "url",
    ["ftp://h/v1", "file:///etc/passwd", "127.0.0.1:8000/v1", "localhost:8000/v1", "http:///v1"],
)
def test_a_base_url_that_is_not_http_is_refused_when_parsed(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_agent_spec({"kind": "openai", "model": "m", "base_url": url})
    assert str(caught.value).startswith(f"base_url {url!r} is not an http:// or https:// URL")

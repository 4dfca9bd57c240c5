"""An env's arguments as ``teamgym envs ID`` and the docs show them, read from the code."""

from __future__ import annotations

import pytest

from teamgym.cli import main
from teamgym.envs import registry
from teamgym.envs.describe import env_arguments
from teamgym.envs.registration import latest_versions


def _by_name(env_id: str) -> dict:
    return {a.name: a for a in env_arguments(env_id)}


def test_a_preset_filled_default_shows_the_presets_value() -> None:
    size = _by_name("foraging-v0")["size"]
    assert size.default == "8 (preset)"
    assert size.presets == {"easy": "6", "medium": "8", "hard": "12"}
    assert "4..20" in size.meaning


@pytest.mark.parametrize("env_id", ["hanabi-v0", "foraging-v1", "keydoor-v0", "publicgoods-v0"])
def test_difficulty_shows_the_preset_none_picks(env_id: str) -> None:
    """Issue 60: ``difficulty`` showed ``None`` beside "(default ``medium``)"."""
    difficulty = _by_name(env_id)["difficulty"]
    assert difficulty.default == "'medium'" and "medium" in difficulty.meaning


def test_types_read_as_written_and_aliases_resolve() -> None:
    args = _by_name("foraging-v0")
    assert args["size"].type == "int | None"
    assert args["obs_mode"].type == "Literal['text', 'vector']"  # not the alias _ObsMode
    assert args["obs_mode"].owner == "TextParallelEnv" and args["size"].owner == "ForagingEnv"


def test_a_registered_value_is_the_default_shown() -> None:
    """signal-v0 is registered with ``message_feedback=False``: that is its default."""
    assert _by_name("signal-v0")["message_feedback"].default == "False"
    assert _by_name("signal-v1")["message_feedback"].default == "True"


@pytest.mark.parametrize("env_id", latest_versions(registry()))
def test_every_argument_of_every_env_says_what_it_means(env_id: str) -> None:
    missing = [a.name for a in env_arguments(env_id) if not a.meaning]
    assert not missing, f"{env_id}: no Args: entry for {missing}"


def test_an_unknown_id_is_refused() -> None:
    with pytest.raises(KeyError):
        env_arguments("nope-v0")


def test_the_cli_prints_meanings_and_presets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["envs", "keydoor-v0"]) == 0
    out = capsys.readouterr().out
    assert "room_size" in out and "(preset)" in out and "easy" in out and "hard" in out
    assert "width of each room" in out

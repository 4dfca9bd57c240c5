"""The one preset helper the games share: names, overrides and range errors."""

from __future__ import annotations

import pytest

from teamgym.envs import make
from teamgym.envs.presets import int_in, resolve

PRESETS = {"easy": {"size": 6, "sight": None}, "medium": {"size": 8, "sight": 3}}


def test_resolve_fills_what_was_left_out() -> None:
    assert resolve(PRESETS, None, {}) == {"size": 8, "sight": 3}
    assert resolve(PRESETS, "easy", {"size": 10, "sight": None}) == {"size": 10, "sight": None}


def test_resolve_names_the_known_difficulties() -> None:
    with pytest.raises(
        ValueError, match=r"difficulty must be one of \['easy', 'medium'\], got 'x'"
    ):
        resolve(PRESETS, "x", {})


@pytest.mark.parametrize("value", [1, 21, 2.0, True, "5"])
def test_int_in_refuses_what_is_not_an_int_in_range(value: object) -> None:
    with pytest.raises(ValueError, match=r"endowment must be an int in 2\.\.20"):
        int_in("endowment", value, 2, 20)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "attr", "expected"),
    [
        ("foraging-v0", {"difficulty": "hard", "size": 10}, "size", 10),
        ("foraging-v0", {"difficulty": "hard"}, "num_items", 4),
        ("keydoor-v0", {"difficulty": "easy", "room_size": 5}, "room_size", 5),
        ("publicgoods-v0", {"difficulty": "hard", "endowment": 7}, "endowment", 7),
    ],
)
def test_games_take_a_preset_and_overrides(
    env_id: str, kwargs: dict[str, object], attr: str, expected: object
) -> None:
    assert getattr(make(env_id, **kwargs).unwrapped, attr) == expected


@pytest.mark.parametrize("env_id", ["foraging-v0", "keydoor-v0", "publicgoods-v0"])
def test_games_refuse_an_unknown_difficulty(env_id: str) -> None:
    with pytest.raises(ValueError, match="difficulty must be one of"):
        make(env_id, difficulty="impossible")

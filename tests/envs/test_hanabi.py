"""hanabi-v0: rules scenario by scenario, the words agents read, vector mode, baselines, and
move-by-move parity with the reference engine (the Hanabi Learning Environment)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from teamgym.envs import make
from teamgym.envs.baselines import RandomPolicy
from teamgym.envs.hanabi import HanabiEnv
from teamgym.envs.hanabi.baselines import HanabiConventions
from teamgym.envs.hanabi.rules import Hanabi, Move, parse_card, standard_deck
from teamgym.envs.lineup import run_episode

DRIVER = Path(__file__).resolve().parents[1] / "reference" / "hanabi_driver.py"

# robot_0: R1 R1 Y2 B5 W3; robot_1: R2 G1 Y1 R3 W4; then the draws.
DEAL_2P = ["R1", "R1", "Y2", "B5", "W3", "R2", "G1", "Y1", "R3", "W4", "G2", "B1", "Y3"]


def _env(n: int = 2, deck: list[str] | None = None, **kwargs: Any) -> HanabiEnv:
    env = HanabiEnv(n, **kwargs)
    env.reset(seed=0, options={"deck": deck or DEAL_2P})
    return env


def _move(env: HanabiEnv, action: str) -> tuple[Any, ...]:
    """The player to move does ``action``; everyone else waits."""
    assert env.game is not None
    actor = env.possible_agents[env.game.current]
    replies = {a: "<action>wait</action>" for a in env.agents} | {
        actor: f"<action>{action}</action>"
    }
    return env.step(replies)


def _events(infos: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in infos["robot_0"]["events"] if e["type"] == kind]


# ---------------------------------------------------------------------- rules
def test_a_given_deck_deals_hands_in_order_and_robot_0_starts() -> None:
    env = _env()
    assert env.game is not None
    assert env.game.hands[0] == [parse_card(c) for c in DEAL_2P[:5]]
    assert env.game.hands[1] == [parse_card(c) for c in DEAL_2P[5:10]]
    assert env.game.deck_size == 50 - 10 and env.game.current == 0


def test_a_hint_must_touch_a_card_and_costs_a_token() -> None:
    env = _env()
    _, infos = env.reset(seed=0, options={"deck": DEAL_2P})
    valid = infos["robot_0"]["valid_actions"]
    assert "hint robot_1 blue" not in valid and "hint robot_1 5" not in valid  # none in hand
    assert {"hint robot_1 red", "hint robot_1 green", "hint robot_1 1"} <= set(valid)
    assert infos["robot_1"]["valid_actions"] == ["wait"]
    _, rewards, _, _, infos = _move(env, "hint robot_1 blue")
    assert (
        rewards["robot_0"] == -env.invalid_penalty and "not one of" in infos["robot_0"]["feedback"]
    )
    assert env.game is not None and env.game.current == 0 and env.game.information == 8
    _, rewards, _, _, infos = _move(env, "hint robot_1 red")
    assert env.game.information == 7 and env.game.current == 1 and rewards["robot_0"] == 0.0
    assert _events(infos, "hint") == [
        {"type": "hint", "agent": "robot_0", "target": "robot_1", "hint": "red", "cards": [1, 4]}
    ]


def test_a_scenario_edited_after_reset_never_makes_step_raise() -> None:
    """Legal moves follow the game as it is now: a scenario that spends the tokens after
    ``reset`` makes a hint an unusable reply (a no-op with its reason), not an exception."""
    env = _env()
    env.reset(seed=0, options={"deck": DEAL_2P})
    assert env.game is not None
    env.game.information = 0
    _, rewards, _, _, infos = _move(env, "hint robot_1 red")
    assert (
        rewards["robot_0"] == -env.invalid_penalty and "not one of" in infos["robot_0"]["feedback"]
    )
    assert not any(a.startswith("hint") for a in infos["robot_0"]["valid_actions"])


def test_discarding_is_illegal_with_every_token_in_hand() -> None:
    env = _env()
    _, infos = env.reset(seed=0, options={"deck": DEAL_2P})
    assert not any(a.startswith("discard") for a in infos["robot_0"]["valid_actions"])
    _, _, _, _, infos = _move(env, "hint robot_1 red")
    assert "discard 1" in infos["robot_1"]["valid_actions"]
    _, _, _, _, infos = _move(env, "discard 5")  # robot_1 discards W4 and draws G2
    assert env.game is not None and env.game.information == 8
    assert env.game.hands[1][-1] == parse_card("G2")
    assert _events(infos, "discard") == [
        {"type": "discard", "agent": "robot_1", "card": "white 4", "critical": False}
    ]


def test_a_play_scores_and_a_misplay_burns_a_fuse_and_the_last_one_scores_zero() -> None:
    env = _env()
    _, rewards, _, _, infos = _move(env, "play 1")  # R1 fits
    assert rewards["robot_0"] == 1.0 and env.game is not None and env.game.fireworks[0] == 1
    assert _events(infos, "subtask_completed")[0]["subtask"] == "red 1"
    _, rewards, _, _, infos = _move(env, "play 4")  # robot_1's R3 does not fit
    assert rewards["robot_1"] == 0.0 and env.game.lives == 2
    assert _events(infos, "misplay")[0]["card"] == "red 3"
    assert _events(infos, "subtask_failed")[0]["reason"] == "misplay"
    _move(env, "play 1")  # robot_0's second R1: misplay
    assert env.game.lives == 1 and env.game.score() == 1
    _, rewards, terms, _, infos = _move(env, "play 1")  # robot_1's R2 fits: 2 points
    assert rewards["robot_1"] == 1.0 and not any(terms.values())
    _, rewards, terms, _, infos = _move(env, "play 1")  # robot_0's Y2: the last fuse
    assert all(terms.values()) and env.agents == []
    assert rewards["robot_0"] == -2.0  # the move that burns the last fuse loses every point
    (outcome,) = _events(infos, "outcome")
    assert outcome["score"] == 0.0 and not outcome["success"]
    assert outcome["extras"]["points"] == 0 and outcome["extras"]["misplays"] == 3
    assert "the game is lost" in infos["robot_0"]["feedback"]


def test_a_completed_firework_returns_a_token() -> None:
    env = _env(deck=["G1", "G2", "G3", "G4", "G5", "R1", "R1", "R1", "Y1", "Y1"])
    for _ in range(4):
        _move(env, "play 1")  # robot_0 plays G1, G2, G3, G4
        _move(env, "hint robot_0 green")
    assert env.game is not None and env.game.information == 4
    _, rewards, _, _, infos = _move(env, "play 1")  # G5
    assert env.game.fireworks[2] == 5 and env.game.information == 5 and rewards["robot_0"] == 1
    assert "completed it" in infos["robot_0"]["feedback"]


def test_the_last_round_gives_every_player_one_more_turn() -> None:
    deck = standard_deck(5)[:12]  # 10 dealt (robot_0: R1 R1 R1 R2 R2), 2 left to draw
    game = Hanabi(2, deck)
    game.apply(Move("colour", 1, 0))  # robot_0 hints red
    game.apply(Move("colour", 1, 0))  # robot_1 hints red
    game.apply(Move("discard", 0))  # robot_0 draws; 1 card left
    game.apply(Move("discard", 0))  # robot_1 draws the last card
    assert game.deck_size == 0 and not game.is_over()
    game.apply(Move("colour", 1, 0))  # robot_0's last turn
    assert not game.is_over() and game.turns_to_play == 1
    game.apply(Move("discard", 0))  # robot_1, who drew the last card, has its last turn too
    assert len(game.hands[1]) == 4  # no card to draw
    assert game.is_over() and game.legal_moves() == []


def test_discarding_the_last_copy_of_a_needed_card_is_a_critical_event() -> None:
    env = _env()
    _move(env, "hint robot_1 red")
    _move(env, "hint robot_0 blue")
    _, _, _, _, infos = _move(env, "discard 4")  # robot_0's B5: the only one
    assert _events(infos, "discard")[0]["critical"] is True
    assert "the last copy" in infos["robot_1"]["feedback"]
    _, _, _, _, infos = _move(env, "discard 1")  # robot_1's R2: another copy remains
    assert _events(infos, "discard")[0]["critical"] is False


def test_observations_state_what_hints_said_positive_and_negative() -> None:
    env = _env()
    obs, *_ = _move(env, "hint robot_1 red")  # robot_1: R2 G1 Y1 R3 W4
    mine = obs["robot_1"]
    assert "- card 1: red; rank unknown" in mine
    assert "- card 2: colour unknown, not red; rank unknown" in mine
    assert "- card 4: red; rank unknown" in mine
    obs, *_ = _move(env, "hint robot_0 1")  # robot_0: R1 R1 Y2 B5 W3
    obs, *_ = _move(env, "hint robot_1 1")
    mine = obs["robot_1"]
    assert "- card 2: colour unknown, not red; rank 1" in mine
    assert "- card 4: red; rank unknown, not 1" in mine
    assert "- card 5: colour unknown, not red; rank unknown, not 1" in mine
    seen = obs["robot_0"]  # robot_0 sees robot_1's cards and what robot_1 knows
    assert "robot_1's cards (what they know in brackets):" in seen
    assert "- card 1: red 2 (red; rank unknown, not 1)" in seen
    assert "- card 1: colour unknown; rank 1" in seen  # robot_0's own R1
    assert "- robot_0 hinted robot_1: cards 2 and 3 are rank 1 (the others are not)." in seen
    assert "Information tokens: 5 of 8. Fuse tokens: 3 of 3. Deck: 40 card(s)." in seen


def test_turns_wait_and_an_unusable_reply_keeps_the_turn() -> None:
    env = HanabiEnv(3)
    _, infos = env.reset(seed=4)
    assert infos["robot_1"]["valid_actions"] == infos["robot_2"]["valid_actions"] == ["wait"]
    env.step({"robot_0": "I play my left card", "robot_1": "wait", "robot_2": "wait"})
    assert env.game is not None and env.game.current == 0 and env.game.moves_made == 0
    obs, _, _, _, infos = env.step(
        {"robot_0": "<say>your 1s!</say><action>play 1</action>", "robot_1": "w", "robot_2": "wait"}
    )
    assert env.game.current == 1 and infos["robot_1"]["valid_actions"] != ["wait"]
    assert "cannot send messages" in infos["robot_0"]["feedback"]  # no table talk
    assert "your 1s" not in obs["robot_1"] and not env.can_speak("robot_0")
    assert "not a legal action" in infos["robot_1"]["feedback"]  # 'w' was not 'wait'


def test_the_seed_decides_the_deal_and_a_deck_replays_it() -> None:
    hands = []
    for seed in (1, 1, 2):
        env = HanabiEnv(4)
        obs, _ = env.reset(seed=seed)
        assert env.game is not None
        hands.append((obs["robot_0"], [list(h) for h in env.game.hands]))
    assert hands[0] == hands[1] and hands[0] != hands[2]
    assert all(len(h) == 4 for h in hands[0][1])  # 4 cards with 4 players


def test_presets_change_colours_and_fuses() -> None:
    easy = HanabiEnv(2, difficulty="easy")
    easy.reset(seed=0)
    assert easy.game is not None and easy.game.max_score == 15 and easy.game.total_cards == 30
    hard = HanabiEnv(2, difficulty="hard")
    hard.reset(seed=0, options={"deck": DEAL_2P})
    _, _, terms, _, infos = _move(hard, "play 3")  # Y2 misplayed: the only fuse
    assert all(terms.values()) and _events(infos, "outcome")[0]["score"] == 0.0
    with pytest.raises(ValueError, match="num_colours"):
        HanabiEnv(2, num_colours=6)
    with pytest.raises(ValueError, match="num_agents"):
        HanabiEnv(6)
    with pytest.raises(ValueError, match="more B5"):
        HanabiEnv(2).reset(seed=0, options={"deck": ["B5", "B5"]})


def test_vector_mode_lists_moves_by_seat_offset_and_masks_the_turn() -> None:
    env = HanabiEnv(3, obs_mode="vector")
    obs, _ = env.reset(seed=0, options={"deck": DEAL_2P})
    names0, names1 = env.action_names("robot_0"), env.action_names("robot_1")
    assert names0[:2] == ["discard 1", "discard 2"] and names0[-1] == "wait"
    slot = names0.index("hint robot_1 red")
    assert names1[slot] == "hint robot_2 red"  # the same slot: the next player, red
    assert obs["robot_1"]["action_mask"].tolist() == [0] * (len(names1) - 1) + [1]
    assert obs["robot_0"]["action_mask"][names0.index("discard 1")] == 0
    size = obs["robot_0"]["observation"].shape[0]
    assert size == env._game_vector_size() and env.observation_space("robot_0").contains(
        obs["robot_0"]
    )
    obs, *_ = env.step({"robot_0": slot, "robot_1": len(names1) - 1, "robot_2": len(names1) - 1})
    assert env.game is not None and env.game.information == 7 and env.game.current == 1
    assert obs["robot_1"]["action_mask"][names1.index("discard 1")] == 1


def test_observations_stay_within_their_bound() -> None:
    longest = 0
    for seed in range(6):
        env = HanabiEnv(5)
        policy = RandomPolicy(seed=seed) if seed % 2 else HanabiConventions()
        obs, infos = env.reset(seed=seed)
        while env.agents:
            longest = max(longest, *(len(env._game_observation(a)) for a in env.agents))
            obs, _, _, _, new = env.step({a: policy.act(a, obs[a], infos[a]) for a in env.agents})
            infos.update(new)
    assert 1500 < longest <= HanabiEnv.max_game_observation_chars


# ---------------------------------------------------------------------- baselines
def test_the_conventions_player_scores_and_random_does_not() -> None:
    for n in (2, 5):
        runs = [
            run_episode(make("hanabi-v0", num_agents=n), HanabiConventions(), seed=s)
            for s in range(15)
        ]
        points = [m.extras["points"] for m in runs]
        assert 10 <= np.mean(points) <= 25 and min(points) > 0, (n, points)
        assert all(0 < m.collaboration_index <= 1 for m in runs)  # plays that scored
        assert all(m.contribution_gini is not None for m in runs)
        randoms = [
            run_episode(make("hanabi-v0", num_agents=n), RandomPolicy(seed=0), seed=s)
            for s in range(15)
        ]
        assert np.mean([m.extras["points"] for m in randoms]) < 2 and not any(
            m.success for m in randoms
        )


def test_the_same_seed_replays_the_same_episode() -> None:
    def trace(seed: int) -> list[str]:
        env, policy = HanabiEnv(3), HanabiConventions()
        obs, infos = env.reset(seed=seed)
        out = []
        while env.agents:
            obs, rewards, _, _, new = env.step(
                {a: policy.act(a, obs[a], infos[a]) for a in env.agents}
            )
            infos.update(new)
            out.append(json.dumps([obs, rewards, new], sort_keys=True))
        return out

    assert trace(3) == trace(3) != trace(4)


# ---------------------------------------------------------------------- the reference engine
def _specs() -> list[dict[str, Any]]:
    """Random games for 2-5 players: low play weights reach the last round, high ones the
    fuse-out; some with 3 colours or one fuse; one scripted game of plays only."""
    specs: list[dict[str, Any]] = []
    for n in (2, 3, 4, 5):
        for k in range(20):
            specs.append(
                {
                    "players": n,
                    "colours": 5,
                    "lives": 3,
                    "seed": 100 * n + k,
                    "moves": None,
                    "play_weight": (0.02, 0.1, 1.0, 3.0)[k % 4],
                }
            )
        specs.append(
            {"players": n, "colours": 3, "lives": 3, "seed": n, "moves": None, "play_weight": 0.05}
        )
        specs.append(
            {"players": n, "colours": 5, "lives": 1, "seed": n, "moves": None, "play_weight": 0.5}
        )
    specs.append(
        {"players": 2, "colours": 5, "lives": 3, "seed": 9, "moves": [["play", 0, -1]] * 30}
    )
    return specs


@pytest.fixture(scope="module")
def reference_games(reference_python: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(spec, game) for every game of :func:`_specs`, as the reference engine played it."""
    specs = _specs()
    proc = subprocess.run(
        [str(reference_python), str(DRIVER), json.dumps(specs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    games = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(games) == len(specs)
    return list(zip(specs, games, strict=True))


def _as_list(move: Move) -> list[int | str]:
    return [move.kind, move.index, move.value]


def _snapshot(env: HanabiEnv) -> dict[str, Any]:
    """Our engine in the driver's terms."""
    game = env.game
    assert game is not None
    legal = list(env.legal_moves().values()) if not game.is_over() else []
    return {
        "player": game.current,
        "legal": [_as_list(m) for m in legal],
        "score": game.score(),
        "information": game.information,
        "lives": game.lives,
        "fireworks": game.fireworks,
        "deck": game.deck_size,
        "over": game.is_over(),
        "knowledge": [[list(k) for k in hand] for hand in game.knowledge],
    }


def test_every_move_matches_the_reference_engine(reference_games) -> None:
    """HLE's games replayed through the env (text actions): the same legal moves in the same
    order, score, tokens, fireworks, deck, card knowledge and end, step by step."""
    ends = {"fuse": 0, "deck": 0, "scripted": 0}
    for spec, game in reference_games:
        env = HanabiEnv(spec["players"], num_colours=spec["colours"], fuse_tokens=spec["lives"])
        env.reset(seed=0, options={"deck": game["deal"]})
        where = f"{spec['players']} players, seed {spec['seed']}"
        for t, step in enumerate(game["steps"]):
            ours = _snapshot(env)
            if step["over"]:  # HLE's player to move after the end is meaningless
                ours["player"] = step["player"]
            expected = {k: v for k, v in step.items() if k != "move"}
            assert ours == expected, f"{where}, step {t}: ours {ours} != reference {expected}"
            if step["move"] is None:
                break
            wanted = Move(*step["move"])
            action = next(text for text, m in env.legal_moves().items() if m == wanted)
            _, _, terms, _, _ = _move(env, action)
            assert all(terms.values()) == game["steps"][t + 1]["over"], f"{where}, step {t}"
        assert env.game is not None
        if spec["moves"] is not None:
            ends["scripted"] += 1
        elif env.game.lives == 0:
            ends["fuse"] += 1
        elif env.game.turns_to_play == 0:
            ends["deck"] += 1
    assert ends["fuse"] >= 20 and ends["deck"] >= 20 and ends["scripted"] == 1, ends


def test_a_truncated_game_reports_its_points_and_render_shows_the_table() -> None:
    env = HanabiEnv(2, max_steps=2, render_mode="ansi")
    env.reset(seed=0, options={"deck": DEAL_2P})
    _move(env, "play 1")  # R1: 1 point
    _, _, terms, truncs, infos = _move(env, "hint robot_0 red")
    assert all(truncs.values()) and not any(terms.values())
    (outcome,) = _events(infos, "outcome")
    assert outcome["extras"]["points"] == 1 and outcome["score"] == pytest.approx(1 / 25)
    shown = env.render()
    assert "score 1/25" in shown and "robot_1: R2 G1 Y1 R3 W4" in shown
    assert env.state() == shown

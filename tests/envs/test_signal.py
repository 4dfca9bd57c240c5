"""signal-v0: scenarios with exact rewards, baselines, and 'no communication -> chance'."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from teamgym.envs import make
from teamgym.envs.baselines import RandomPolicy, make_baseline
from teamgym.envs.lineup import run_episode
from teamgym.envs.signal import SignalEnv


def _right_pick(env: SignalEnv, listener: str) -> str:
    rnd = env.round
    if env.pick_by == "name":
        return f"pick {env._names[rnd.target]}"
    return f"pick {rnd.orders[listener].index(rnd.target) + 1}"


def test_scenario_exact_rewards_and_events() -> None:
    env = make("signal-v0", num_agents=3, num_rounds=1)
    obs, infos = env.reset(seed=11)
    assert env.speaker == "robot_0"
    assert infos["robot_0"]["valid_actions"] == ["say", "pass"]
    assert "The target is:" in obs["robot_0"] and "The target is:" not in obs["robot_1"]
    obs, rewards, term, trunc, infos = env.step(
        {
            "robot_0": "<say>small red</say><action>say</action>",
            "robot_1": "wait",
            "robot_2": "<action>wait</action>",
        }
    )
    assert rewards == {"robot_0": 0.0, "robot_1": 0.0, "robot_2": 0.0}
    assert "- robot_0: small red" in obs["robot_1"] and "- robot_0: small red" in obs["robot_2"]
    assert [e["type"] for e in infos["robot_1"]["events"]] == ["message"]
    wrong = (env.round.orders["robot_2"].index(env.round.target) + 1) % 4 + 1
    obs, rewards, term, trunc, infos = env.step(
        {
            "robot_0": "wait",
            "robot_1": _right_pick(env, "robot_1"),
            "robot_2": f"<action>pick {wrong}</action>",
        }
    )
    assert rewards == {"robot_0": 0.5, "robot_1": 1.0, "robot_2": 0.0}
    assert all(term.values()) and not any(trunc.values()) and env.agents == []
    types = [e["type"] for e in infos["robot_0"]["events"]]
    assert types == [
        "subtask_attempted",
        "subtask_completed",
        "subtask_attempted",
        "subtask_failed",
        "outcome",
    ]
    assert infos["robot_0"]["events"][-1] == {
        "type": "outcome",
        "success": False,
        "score": 0.5,
        "extras": {},
    }
    assert infos["robot_1"]["feedback"].startswith("Correct")
    assert infos["robot_2"]["feedback"].startswith("Wrong")


def test_invalid_reply_is_a_penalised_no_op_with_feedback() -> None:
    env = make("signal-v0", num_rounds=1, invalid_penalty=0.05)
    obs, _ = env.reset(seed=0)
    obs, rewards, _, _, infos = env.step(
        {"robot_0": "I refuse to answer", "robot_1": "<action>dance</action>"}
    )
    assert rewards == {"robot_0": -0.05, "robot_1": -0.05}
    assert "not one of: say, pass" in infos["robot_0"]["feedback"]
    assert "'dance' is not one of: wait" in infos["robot_1"]["feedback"]
    assert "'dance' is not one of" in obs["robot_1"]  # the agent reads why in its next turn
    assert sum(e["type"] == "invalid_action" for e in infos["robot_0"]["events"]) == 2
    # the game went on: the listener now picks, and a non-pick counts as a failed subtask
    _, _, term, _, infos = env.step({"robot_0": "wait", "robot_1": None})
    assert all(term.values())
    assert any(
        e["type"] == "subtask_failed" and e["reason"] == "no pick"
        for e in infos["robot_1"]["events"]
    )


def test_say_without_text_and_listener_messages() -> None:
    env = make("signal-v0", num_agents=3, num_rounds=1)
    env.reset(seed=0)
    obs, _, _, _, infos = env.step(
        {"robot_0": "<action>say</action>", "robot_1": "<say>psst</say>wait", "robot_2": "wait"}
    )
    assert "no <say>...</say> text was delivered" in infos["robot_0"]["feedback"]
    assert "cannot send messages" in infos["robot_1"]["feedback"]
    assert "Messages:" not in obs["robot_2"]


def test_word_budget_and_message_cap() -> None:
    env = make("signal-v0", word_budget=2, num_rounds=1)
    env.reset(seed=0)
    obs, _, _, _, infos = env.step(
        {"robot_0": "<say>one two three four</say><action>say</action>", "robot_1": "wait"}
    )
    assert "- robot_0: one two\n" in obs["robot_1"]
    assert "word budget" in infos["robot_0"]["feedback"]
    env = make("signal-v0", word_budget=50, message_max_tokens=3, num_rounds=1)
    env.reset(seed=0)
    obs, _, _, _, infos = env.step(
        {"robot_0": "<say>a b c d e</say><action>say</action>", "robot_1": "wait"}
    )
    assert "- robot_0: a b c [truncated: 2 more tokens]" in obs["robot_1"]
    assert infos["robot_1"]["events"][0]["truncated"] is True


def test_rotating_and_fixed_speaker() -> None:
    env = make("signal-v0", num_agents=3, num_rounds=4)
    env.reset(seed=0)
    speakers = []
    while env.agents:
        speakers.append(env.speaker)
        env.step(dict.fromkeys(env.agents, "wait"))
        env.step(dict.fromkeys(env.agents, "wait"))
    assert speakers == ["robot_0", "robot_1", "robot_2", "robot_0"]
    env = make("signal-v0", num_agents=3, num_rounds=3, speaker="fixed")
    env.reset(seed=0)
    env.step(dict.fromkeys(env.agents, "wait"))
    env.step(dict.fromkeys(env.agents, "wait"))
    assert env.speaker == "robot_0"


def test_truncation_at_max_steps() -> None:
    env = make("signal-v0", num_rounds=5, max_steps=3)
    env.reset(seed=0)
    for _ in range(2):
        _, _, term, trunc, _ = env.step(dict.fromkeys(env.agents, "wait"))
        assert not any(trunc.values())
    _, _, term, trunc, _ = env.step(dict.fromkeys(env.agents, "wait"))
    assert all(trunc.values()) and not any(term.values()) and env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_candidates": 1},
        {"num_candidates": 10},
        {"num_attributes": 0},
        {"num_values": 7},
        {"num_rounds": 0},
        {"word_budget": 0},
        {"speaker": "random"},
        {"obs_mode": "image"},
        {"max_steps": 0},
        {"message_max_tokens": 0},
        {"render_mode": "human"},
        {"obs_mode": "vector", "num_attributes": 5, "num_values": 6},
    ],
)
def test_bad_parameters_raise_clearly(kwargs) -> None:
    with pytest.raises(ValueError, match=r"must|vector mode"):
        make("signal-v0", **kwargs)


def test_expert_wins_and_random_is_at_chance() -> None:
    env = make("signal-v0", num_agents=2, num_rounds=1, num_candidates=4)
    expert = make_baseline("signal-v0", "expert")
    results = [run_episode(env, expert, seed=s) for s in range(200)]
    assert all(m.success for m in results)
    random_scores = [run_episode(env, RandomPolicy(), seed=s).score for s in range(2000)]
    mean, se = np.mean(random_scores), math.sqrt(0.25 * 0.75 / 2000)
    assert abs(mean - 0.25) < 4 * se, f"random accuracy {mean:.3f}, chance 0.25"


@pytest.mark.parametrize("pick_by", ["number", "name"])
def test_babbler_always_names_an_object_and_stays_at_chance(pick_by: str) -> None:
    env = make("signal-v0", num_rounds=1, num_candidates=3, num_attributes=1, pick_by=pick_by)
    babbler = make_baseline("signal-v0", "babbler", seed=3)
    results, named = [], 0
    for seed in range(1500):
        obs, infos = env.reset(seed=seed)
        babbler.reset(seed)
        reply = babbler.act("robot_0", obs["robot_0"], infos["robot_0"])
        objects = re.findall(r"^\d\. (.+)$", obs["robot_0"], re.MULTILINE)
        said = re.fullmatch(r"<say>(.+)</say><action>say</action>", reply)
        assert said and said.group(1) in objects, reply  # always talks, always an object
        named += said.group(1) == re.search(r"The target is: (.+)", obs["robot_0"]).group(1)
        results.append(run_episode(env, babbler, seed=seed))
    assert all(m.invalid_action_rate == 0 for m in results)  # valid replies only
    se = math.sqrt(2 / 9 / 1500)
    for rate in (np.mean([m.success for m in results]), named / 1500):
        assert abs(rate - 1 / 3) < 4 * se, f"{rate:.3f}, chance 1/3"  # no strategy


def test_palette_babbler_names_the_target_at_the_palettes_chance() -> None:
    """The team stage's warm-up teacher: its messages are drawn from every object the game
    makes, listed or not, so they name the target 1/4 of the time (4 colours), not the
    babbler's 1/3 (3 listed objects, one of them the target); it needs the env bound."""
    env = make("signal-v0", num_rounds=1, num_candidates=3, num_attributes=1, pick_by="name")
    babbler = make_baseline("signal-v0", "palette-babbler", seed=3)
    obs, infos = env.reset(seed=0)
    with pytest.raises(RuntimeError, match="bind"):
        babbler.act("robot_0", obs["robot_0"], infos["robot_0"])
    babbler.bind(env)
    assert babbler.palette == ["red", "green", "blue", "yellow"]
    named, unlisted, episodes = 0, 0, 2000
    for seed in range(episodes):
        obs, infos = env.reset(seed=seed)
        babbler.reset(seed)
        said = re.fullmatch(
            r"<say>(.+)</say><action>say</action>",
            babbler.act("robot_0", obs["robot_0"], infos["robot_0"]),
        )
        assert said and said.group(1) in babbler.palette
        named += said.group(1) == re.search(r"The target is: (.+)", obs["robot_0"]).group(1)
        unlisted += said.group(1) not in re.findall(r"^\d\. (.+)$", obs["robot_0"], re.MULTILINE)
    se = math.sqrt(3 / 16 / episodes)
    assert abs(named / episodes - 1 / 4) < 4 * se, f"{named / episodes:.3f}, chance 1/4"
    assert abs(unlisted / episodes - 1 / 4) < 4 * se  # the one colour not listed, as often
    listener = babbler.act("robot_1", *_listener_turn(env, "<say>red</say><action>say</action>"))
    assert re.fullmatch(r"<action>pick (red|green|blue|yellow)</action>", listener), listener


def _listener_turn(env, speaker_reply: str) -> tuple[str, dict]:
    """The listener's observation and info after the speaker's ``speaker_reply``."""
    obs, _, _, _, infos = env.step({"robot_0": speaker_reply, "robot_1": "<action>wait</action>"})
    return obs["robot_1"], infos["robot_1"]


@pytest.mark.parametrize("num_agents", [2, 4, 8])
def test_expert_wins_for_every_team_size(num_agents: int) -> None:
    env = make("signal-v0", num_agents=num_agents, num_candidates=6, num_rounds=num_agents)
    expert = make_baseline("signal-v0", "expert")
    assert all(run_episode(env, expert, seed=s).success for s in range(30))


@pytest.mark.parametrize(
    ("listener_order", "pick_by"),
    [("shuffled", "number"), ("sorted", "number"), ("shuffled", "name")],
)
def test_without_communication_the_listener_view_does_not_depend_on_the_target(
    listener_order: str, pick_by: str
) -> None:
    """The exact property: change which candidate is the target and every listener observation
    (text and vector) stays byte-identical, so no policy can beat chance without messages."""
    for mode in ("text", "vector"):
        env = make(
            "signal-v0",
            num_agents=3,
            communication=False,
            obs_mode=mode,
            num_rounds=1,
            listener_order=listener_order,
            pick_by=pick_by,
        )
        for seed in range(50):
            env.reset(seed=seed)
            env.step(
                {
                    a: ("<say>red</say><action>say</action>" if a == env.speaker else "wait")
                    if mode == "text"
                    else 0
                    for a in env.agents
                }
            )
            original = env.round
            views = []
            for target in range(env.num_candidates):
                env.round = dataclasses.replace(original, target=target)
                views.append([env._observe(a, env._game_valid_actions(a)) for a in env.listeners])
            env.round = original
            for other in views[1:]:
                for a, b in zip(views[0], other, strict=False):
                    if mode == "text":
                        assert a == b
                    else:
                        assert np.array_equal(a["observation"], b["observation"])


@pytest.mark.parametrize(
    ("listener_order", "pick_by"),
    [("shuffled", "number"), ("sorted", "number"), ("shuffled", "name")],
)
def test_without_communication_listeners_are_at_chance(listener_order: str, pick_by: str) -> None:
    """Statistically: the expert listener (and fixed-position listeners) score 1/K."""
    k, n = 3, 3000
    env = make(
        "signal-v0",
        num_agents=2,
        num_candidates=k,
        num_rounds=1,
        communication=False,
        listener_order=listener_order,
        pick_by=pick_by,
    )
    expert = make_baseline("signal-v0", "expert")
    scores = [run_episode(env, expert, seed=s).score for s in range(n)]
    se = math.sqrt((1 / k) * (1 - 1 / k) / n)
    assert abs(np.mean(scores) - 1 / k) < 4 * se, f"accuracy {np.mean(scores):.3f} without messages"
    # the target's position in the listener's list is uniform (chi-square, df=k-1, p=0.001)
    counts = np.zeros(k)
    for s in range(n):
        env.reset(seed=s)
        counts[env.round.orders["robot_1"].index(env.round.target)] += 1
    chi2 = float(((counts - n / k) ** 2 / (n / k)).sum())
    assert chi2 < 13.82, f"target position not uniform: {counts}"


@pytest.mark.parametrize("pick_by", ["number", "name"])
def test_vector_mode_speaker_can_describe_the_target(pick_by: str) -> None:
    env = make("signal-v0", obs_mode="vector", num_rounds=1, pick_by=pick_by)
    obs, _ = env.reset(seed=2)
    names = env.action_names("robot_0")
    target_words = env._names[env.round.target]
    say = names.index(f"say: {target_words}")
    assert obs["robot_0"]["action_mask"][say] == 1 and obs["robot_1"]["action_mask"][say] == 0
    obs, _, _, _, _ = env.step({"robot_0": say, "robot_1": names.index("wait")})
    heard = obs["robot_1"]["observation"][-len(env._vocab) :]
    assert {env._vocab[i] for i in np.flatnonzero(heard)} == set(target_words.split())
    pick = names.index(_right_pick(env, "robot_1"))
    _, rewards, _, _, _ = env.step({"robot_0": names.index("wait"), "robot_1": pick})
    assert rewards == {"robot_0": 1.0, "robot_1": 1.0}


def test_vector_mode_rejects_masked_and_bad_indices() -> None:
    env = make("signal-v0", obs_mode="vector", num_rounds=1)
    env.reset(seed=0)
    names = env.action_names("robot_1")
    _, rewards, _, _, infos = env.step({"robot_0": 10_000, "robot_1": names.index("pick 1")})
    assert "out of range" in infos["robot_0"]["feedback"]
    assert "not possible now" in infos["robot_1"]["feedback"]
    assert rewards == {"robot_0": -0.01, "robot_1": -0.01}


def test_observations_stay_bounded_over_long_episodes() -> None:
    """Token cost per turn is flat: round 100's observation is no longer than round 1's."""
    env = make("signal-v0", num_agents=4, num_rounds=100)
    expert = make_baseline("signal-v0", "expert")
    obs, infos = env.reset(seed=0)
    lengths = []
    while env.agents:
        lengths.append(max(len(o) for o in obs.values()))
        obs, _, _, _, new = env.step({a: expert.act(a, obs[a], infos[a]) for a in env.agents})
        infos.update(new)
    assert max(lengths[-20:]) <= max(lengths[:20]) + 10, (lengths[:20], lengths[-20:])


def test_unicode_and_huge_messages_stay_in_the_space() -> None:
    env = make("signal-v0", num_agents=2, word_budget=10_000)
    env.reset(seed=0)
    huge = "漢字 \x00 é " * 100_000 + "x" * 100_000
    obs, _, _, _, _ = env.step(
        {"robot_0": f"<say>{huge}</say><action>say</action>", "robot_1": "wait"}
    )
    assert env.observation_space("robot_1").contains(obs["robot_1"])
    assert "[truncated:" in obs["robot_1"]


def test_tokenizer_counts_message_tokens() -> None:
    class CharTokenizer:
        def encode(self, text):
            return [ord(c) for c in text]

        def decode(self, ids):
            return "".join(chr(i) for i in ids)

    env = make("signal-v0", message_max_tokens=5, tokenizer=CharTokenizer(), word_budget=100)
    env.reset(seed=0)
    obs, _, _, _, infos = env.step(
        {"robot_0": "<say>abcdefgh</say><action>say</action>", "robot_1": "wait"}
    )
    assert "- robot_0: abcde [truncated: 3 more tokens]" in obs["robot_1"]
    assert infos["robot_1"]["events"][0]["tokens"] == 5


def test_render_and_state() -> None:
    env = make("signal-v1", render_mode="ansi")
    env.reset(seed=0)
    view = env.render()
    assert view.startswith("signal-v1 round 1/2") and view.count("*") == 1
    assert env.state() == view
    old = make("signal-v0", render_mode="ansi")  # 0.1.0's wording names its own id
    old.reset(seed=0)
    assert old.render().startswith("signal-v0 round 1/2")
    assert make("signal-v0").render() is None
    vec = make("signal-v0", obs_mode="vector")
    vec.reset(seed=0)
    assert vec.state().shape == (2 * vec._game_vector_size(),)


def test_sorted_listener_order_is_one_fixed_order_and_the_expert_still_wins() -> None:
    """The curriculum stage: every listener sees the objects sorted by attribute values (the
    speaker keeps its shuffle), and the game is otherwise the same."""
    env = make("signal-v0", num_agents=3, num_candidates=4, listener_order="sorted")
    for seed in range(20):
        env.reset(seed=seed)
        rnd = env.round
        for listener in env.listeners:
            assert [rnd.codes[i] for i in rnd.orders[listener]] == sorted(rnd.codes)
    expert = make_baseline("signal-v0", "expert")
    assert all(run_episode(env, expert, seed=s).success for s in range(20))
    with pytest.raises(ValueError, match="listener_order"):
        make("signal-v0", listener_order="alphabetical")


def test_pick_by_name_scores_the_named_object_whatever_the_list_order() -> None:
    """Listeners pick by the object's words; valid actions follow each listener's own order."""
    env = make("signal-v0", num_agents=3, num_candidates=3, num_rounds=1, pick_by="name")
    env.reset(seed=5)
    env.step(
        {"robot_0": "<say>red</say><action>say</action>", "robot_1": "wait", "robot_2": "wait"}
    )
    rnd = env.round
    for listener in env.listeners:
        shown = [f"pick {env._names[i]}" for i in rnd.orders[listener]]
        assert env._game_valid_actions(listener) == shown
    target = env._names[rnd.target]
    wrong = next(n for n in env._names if n != target)
    _, rewards, _, _, infos = env.step(
        {
            "robot_0": "wait",
            "robot_1": f"<action>Pick {target}</action>",
            "robot_2": f"pick {wrong}",
        }
    )
    assert rewards == {"robot_0": 0.5, "robot_1": 1.0, "robot_2": 0.0}
    assert "pick an object by its words" in env._game_instructions("robot_1")
    numbered = make("signal-v0", num_rounds=1, pick_by="name")
    numbered.reset(seed=0)
    numbered.step({"robot_0": "pass", "robot_1": "wait"})
    _, rewards, _, _, infos = numbered.step({"robot_0": "wait", "robot_1": "pick 1"})
    assert "'pick 1' is not one of" in infos["robot_1"]["feedback"]  # numbers are not names
    expert = make_baseline("signal-v0", "expert")
    assert all(run_episode(env, expert, seed=s).success for s in range(20))
    with pytest.raises(ValueError, match="pick_by"):
        make("signal-v0", pick_by="colour")


def test_vector_view_follows_a_round_set_from_outside() -> None:
    """The speaker's vector is kept per round; a round replaced between reset and step (as
    scenario tests do) is a new round for it."""
    import dataclasses

    env = make("signal-v1", num_agents=3, obs_mode="vector")
    env.reset(seed=4)
    speaker = env.unwrapped.speaker
    before = env.unwrapped._game_vector_observation(speaker)
    other = (env.unwrapped.round.target + 1) % env.unwrapped.num_candidates
    env.unwrapped.round = dataclasses.replace(env.unwrapped.round, target=other)
    after = env.unwrapped._game_vector_observation(speaker)
    assert not np.array_equal(before, after)


def test_any_order_babbler_names_a_listed_object_its_words_in_either_order() -> None:
    """The both-seats warm-up's speaker teacher: it names an object of its list, as the
    babbler does, but its words come in either order about as often, so under a one-word
    budget its first word is the shape about half the time (the babbler's: never)."""
    env = make(
        "signal-v0",
        num_rounds=1,
        speaker="fixed",
        num_candidates=2,
        num_attributes=2,
        num_values=2,
        word_budget=1,
        pick_by="name",
    )
    babbler = make_baseline("signal-v0", "any-order-babbler", seed=0)
    shape_first, episodes = 0, 1000
    for seed in range(episodes):
        obs, infos = env.reset(seed=seed)
        babbler.reset(seed)
        said = re.fullmatch(
            r"<say>(\w+) (\w+)</say><action>say</action>",
            babbler.act("robot_0", obs["robot_0"], infos["robot_0"]),
        )
        assert said, "one object's two words"
        listed = re.findall(r"^\d\. (\w+) (\w+)$", obs["robot_0"], re.MULTILINE)
        pair = (said.group(1), said.group(2))
        assert pair in listed or pair[::-1] in listed, (pair, listed)
        shape_first += pair[0] in ("circle", "square", "triangle", "star")
    se = math.sqrt(1 / 4 / episodes)
    assert abs(shape_first / episodes - 1 / 2) < 4 * se, f"{shape_first / episodes:.3f}"
    listener = babbler.act("robot_1", *_listener_turn(env, "<say>red</say><action>say</action>"))
    assert re.fullmatch(r"<action>pick \w+ \w+</action>", listener), listener

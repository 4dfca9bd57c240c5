"""scripts/signal_protocol.py: the speaker's protocol read from verl's dumps, on rows made from
the real env's episodes (its prompts, its message delivery, its outcome)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from teamgym.envs import make

SCRIPT = Path(__file__).parents[2] / "scripts" / "signal_protocol.py"
ARGS = dict(
    num_rounds=1, speaker="fixed", num_candidates=2, num_attributes=2, num_values=2,
    word_budget=1, pick_by="name",
)  # fmt: skip


def _target(obs: str) -> str:
    return obs.split("The target is: ")[1].splitlines()[0]


def _objects(obs: str) -> list[str]:
    return [ln.split(". ", 1)[1] for ln in obs.splitlines() if ln[:1].isdigit()]


def _episode_rows(seed: int, reply: str, pick: Callable[[list[str], str], str]) -> list[dict]:
    """The speaker's and the listener's rows of one episode, decoded as verl writes them: the
    speaker sends ``reply``; the listener picks ``pick(valid picks, target)``."""
    env = make("signal-v0", **ARGS)
    obs, info = env.reset(seed=seed)
    wait = "<action>wait</action>"
    talked, *_ = env.step({"robot_0": reply, "robot_1": wait})
    picks = [a for a in talked["robot_1"].split("Valid actions: ")[1].split(" | ")]
    choice = pick(picks, _target(obs["robot_0"]))
    _, rewards, *_ = env.step({"robot_0": wait, "robot_1": f"<action>{choice}</action>"})
    outputs = {
        "robot_0": f"{reply}user\n{talked['robot_0']}\nassistant\n{wait}",
        "robot_1": f"{wait}user\n{talked['robot_1']}\nassistant\n<action>{choice}</action>",
    }
    return [
        {
            "input": f"system\n{info[a]['instructions']}\nuser\n{obs[a]}\nassistant\n",
            "output": outputs[a],
            "success": float(rewards["robot_1"] > 0),
        }
        for a in ("robot_0", "robot_1")
    ]


def _right(picks: list[str], target: str) -> str:
    return f"pick {target}"


def _first(picks: list[str], target: str) -> str:
    return picks[0]


def _dump(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_the_protocol_table_counts_each_targets_utterances_and_the_success_after_them(tmp_path):
    env = make("signal-v0", **ARGS)
    by_setting: dict[str, list[int]] = {}
    for seed in range(60):
        obs, _ = env.reset(seed=seed)
        target = _target(obs["robot_0"])
        objects = _objects(obs["robot_0"])
        other = next(o for o in objects if o != target)
        by_setting.setdefault(f"{target} (other: {other})", []).append(seed)
    setting, seeds = max(by_setting.items(), key=lambda kv: len(kv[1]))
    assert len(seeds) >= 3
    word = setting.split()[0]
    rows = [
        *_episode_rows(seeds[0], f"<say>{word.upper()}</say><action>say</action>", _right),
        *_episode_rows(seeds[1], f"<action>say</action><say>{word} thing</say>", _first),
        *_episode_rows(seeds[2], "The object is a nice one.\n\nThe game is", _right),
    ]
    done = _script(str(_dump(tmp_path / "5.jsonl", rows)))
    assert done.returncode == 0, done.stderr
    line = next(row for row in done.stdout.splitlines() if row.startswith(f"| {setting} |"))
    # the word budget keeps "thing" out; success is the env's outcome of each episode
    second = float(rows[3]["success"])
    assert f'say "{word}" (2, {(1.0 + second) / 2:.2f})' in line, line
    assert "invalid (1, 1.00)" in line, line  # an invalid speaker, a right pick all the same
    # only the speaker's rows count: one table row per setting the speaker saw
    assert sum(row.startswith("| ") for row in done.stdout.splitlines()) == 2 + 1


def test_by_step_counts_telling_words_and_listeners_following_them(tmp_path):
    """Step 1: the speaker names the target's colour (which tells it apart only where the other
    object's colour differs) and the listener picks right; step 2: the same words, and the
    listener picks its first object whatever it hears (where the colour tells the objects
    apart, it followed the message exactly when it picked right)."""
    env = make("signal-v0", **ARGS)
    step1, step2, telling = [], [], []
    for seed in range(12):
        obs, _ = env.reset(seed=seed)
        colour = _target(obs["robot_0"]).split()[0]
        objects = _objects(obs["robot_0"])
        telling.append(sum(colour in o.split() for o in objects) == 1)
        reply = f"<say>{colour}</say><action>say</action>"
        step1 += _episode_rows(seed, reply, _right)
        step2 += _episode_rows(seed, reply, _first)
    apart = sum(telling)
    assert 0 < apart < 12, "the seeds mix settings that colour tells apart and ones it does not"
    followed = sum(r["success"] for r, t in zip(step2[1::2], telling, strict=True) if t)
    assert 0 < followed < apart, "the first object is sometimes the one named, sometimes not"
    _dump(tmp_path / "dump" / "1.jsonl", step1)
    _dump(tmp_path / "dump" / "2.jsonl", step2)
    done = _script("--by-step", str(tmp_path / "dump"))
    assert done.returncode == 0, done.stderr
    rows = [r for r in done.stdout.splitlines() if r.startswith(("| 1 ", "| 2 "))]
    assert rows == [
        f"| 1 | {apart}/12 | {apart}/{apart} |",
        f"| 2 | {apart}/12 | {int(followed)}/{apart} |",
    ]


def test_without_a_dump_it_prints_its_usage():
    done = _script()
    assert done.returncode == 2
    assert "validation_data_dir" in done.stderr


def _wrong(picks: list[str], target: str) -> str:
    return next(p for p in picks if p != f"pick {target}")


def test_signal_sums_each_words_group_centred_score_by_what_the_target_shares(tmp_path):
    """Two copies of an episode whose objects share their first word (the colour): the shape
    sent and picked right (+0.5), the colour sent and the other object picked (-0.5); two copies
    of an episode whose objects share nothing, both the colour, both right (a group that scored
    alike adds nothing)."""
    env = make("signal-v0", **ARGS)
    seeds: dict[str, int] = {}
    for seed in range(60):
        obs, _ = env.reset(seed=seed)
        target = _target(obs["robot_0"]).split()
        other = next(o for o in _objects(obs["robot_0"]) if o.split() != target).split()
        context = (
            "same colour" if target[0] == other[0] else "none" if target[1] != other[1] else ""
        )
        seeds.setdefault(context, seed)
    rows = []
    for group, (seed, replies) in enumerate(
        [(seeds["same colour"], [(1, _right), (0, _wrong)]), (seeds["none"], [(0, _right)] * 2)]
    ):
        obs, _ = env.reset(seed=seed)
        words = _target(obs["robot_0"]).split()
        for copy, (word, pick) in enumerate(replies):
            reply = f"<say>{words[word]}</say><action>say</action>"
            for agent, row in enumerate(_episode_rows(seed, reply, pick)):
                rows.append({**row, "score": row["success"], "uid": f"g{group}_{agent}_{copy}_0"})
    _dump(tmp_path / "dump" / "3.jsonl", rows)
    done = _script("--signal", str(tmp_path / "dump"))
    assert done.returncode == 0, done.stderr
    table = [r for r in done.stdout.splitlines() if r.startswith("| 0-4 ")]
    assert table == [
        "| 0-4 | same word 1 | word 1: -0.50 (1); word 2: +0.50 (1) |",
        "| 0-4 | shares none | word 1: +0.00 (2) |",
    ]

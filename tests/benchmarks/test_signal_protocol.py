"""scripts/signal_protocol.py: the speaker's protocol read from verl's validation dump."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from teamgym.envs import make

SCRIPT = Path(__file__).parents[2] / "scripts" / "signal_protocol.py"


def _rows(replies: dict[int, tuple[str, float]]) -> list[dict]:
    """verl's dump rows (decoded as verl writes them) for the speaker and listener of each seed."""
    env = make(
        "signal-v0", num_rounds=1, speaker="fixed", num_candidates=2, num_attributes=2,
        num_values=2, word_budget=1, pick_by="name",
    )  # fmt: skip
    rows = []
    for seed, (reply, success) in replies.items():
        obs, info = env.reset(seed=seed)
        for agent, output in (
            (
                "robot_0",
                f"{reply}user\nStep 1/2. The listeners are picking.\nassistant\n<action>wait</action>",
            ),
            (
                "robot_1",
                "<action>wait</action>user\nStep 1/2. Pick.\nassistant\n<action>pick x</action>",
            ),
        ):
            prompt = f"system\n{info[agent]['instructions']}\nuser\n{obs[agent]}\nassistant\n"
            rows.append({"input": prompt, "output": output, "success": success})
    return rows


def test_the_protocol_table_counts_each_targets_utterances_and_the_success_after_them(tmp_path):
    targets = {}
    env = make(
        "signal-v0", num_rounds=1, speaker="fixed", num_candidates=2, num_attributes=2,
        num_values=2, word_budget=1, pick_by="name",
    )  # fmt: skip
    for seed in range(40):
        obs, _ = env.reset(seed=seed)
        target = obs["robot_0"].split("The target is: ")[1].splitlines()[0]
        objects = [
            line.split(". ", 1)[1] for line in obs["robot_0"].splitlines() if line[:1].isdigit()
        ]
        other = next(o for o in objects if o != target)
        targets.setdefault(f"{target} (other: {other})", []).append(seed)
    target, seeds = max(targets.items(), key=lambda kv: len(kv[1]))
    assert len(seeds) >= 3
    word = target.split()[0]
    replies = {
        seeds[0]: (f"<say>{word.upper()}</say><action>say</action>", 1.0),
        seeds[1]: (f"<action>say</action><say>{word} thing</say>", 0.0),  # over budget
        seeds[2]: ("The object is a nice one.\n\nThe game is", 0.0),
    }
    dump = tmp_path / "5.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in _rows(replies)))

    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(dump)], capture_output=True, text=True, check=True
    ).stdout
    line = next(row for row in out.splitlines() if row.startswith(f"| {target} |"))
    assert f'say "{word}" (2, 0.50)' in line
    assert "invalid (1, 0.00)" in line
    # Only the speaker's rows count: one table row per target the speaker saw.
    assert sum(row.startswith("| ") for row in out.splitlines()) == 2 + 1


def test_without_a_dump_it_prints_its_usage():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "validation_data_dir" in done.stderr

"""The protocol a trained signal-v0 speaker uses: what it sends for each target (the words within
its word budget, as the listener reads them), read from verl's validation dump
(``trainer.validation_data_dir``), and how often the listener then picks right.

    python scripts/signal_protocol.py runs/sig-s0/val/0.jsonl runs/sig-s0/val/40.jsonl
    python scripts/signal_protocol.py --by-step runs/sig-s0/rollout
    python scripts/signal_protocol.py --signal runs/sig-s0/rollout

Each dump row is one seat's trajectory of one episode (verl's ``input``: the seat's first
prompt; ``output``: its replies and the env's later turns as decoded text). The speaker's row is
the one whose prompt says "You are the speaker"; its first reply is parsed with the env's own
parser (:func:`teamgym.envs.parsing.parse_reply`). Prints one Markdown table per dump; with
``--by-step DIR`` (verl's ``trainer.rollout_data_dir`` or ``validation_data_dir``), one row per
step's dump: how often the speaker's words tell the target apart from the other objects, and how
often the listener picks the one object a message names. With ``--signal DIR`` (the training
rollouts), where GRPO's signal on the speaker's word went, five steps a row: by what the target
shares with the other objects, the summed group-centred score of each kind of word sent (the
target's first word, its second, ...), the advantage's sign and size before GRPO divides by the
group's spread; a group whose copies all scored alike adds nothing.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

from teamgym.envs.parsing import parse_reply

#: Where the chat template's next user turn starts in verl's decoded output (special tokens dropped).
NEXT_TURN = re.compile(r"user\nStep \d+/\d+\.")


def speaker_said(output: str, word_budget: int | None = None) -> str:
    """What the speaker's first reply sends: ``say "<words>"`` (its first ``word_budget`` words,
    as the env delivers them), ``pass``, or ``invalid``."""
    reply = NEXT_TURN.split(output, maxsplit=1)[0]
    parsed = parse_reply(reply)
    action = (parsed.action or "").strip().lower()
    if action == "say" and parsed.message:
        words = parsed.message.lower().split()
        return f'say "{" ".join(words[:word_budget])}"'
    if action == "pass":
        return "pass"
    return "invalid"


def _objects(text: str) -> list[str]:
    return [o.strip() for o in re.findall(r"^\d+\. (.+)$", text, re.M)]


def speaker_turn(row: dict) -> tuple[str, list[str], str] | None:
    """(target, the other objects, what was sent) of a speaker's row; None for another seat's."""
    prompt = row["input"]
    match = re.search(r"The target is: (.+)", prompt)
    if "You are the speaker" not in prompt or match is None:
        return None
    target = match.group(1).strip()
    budget = re.search(r"Describe it in at most (\d+) words", prompt)
    said = speaker_said(row["output"], int(budget.group(1)) if budget else None)
    return target, [o for o in _objects(prompt) if o != target], said


def tells_apart(target: str, others: list[str], said: str) -> bool:
    """Whether the sent words hold a word of the target's that no other object has."""
    words = said.removeprefix("say ").strip('"').split() if said.startswith("say ") else []
    return any(w in target.split() and all(w not in o.split() for o in others) for w in words)


def listener_follows(row: dict) -> bool | None:
    """Whether a listener's pick is the one object its message names (None: not a listener's
    row, or the message names no single object)."""
    heard = re.search(r"^- \w+: (.+)$", row["output"], re.M)
    picked = re.search(r"<action>pick ([^<]+)</action>", row["output"])
    if "You are the speaker" in row["input"] or heard is None or picked is None:
        return None
    objects = _objects(row["output"].split("Your objects:")[-1].split("Messages:")[0])
    named = [o for o in objects if set(heard.group(1).lower().split()) & set(o.split())]
    return picked.group(1).strip() == named[0] if len(named) == 1 else None


def protocol(rows: list[dict]) -> dict[str, dict[str, list[float]]]:
    """Target (and the other objects) -> what the speaker sent -> the success of each episode
    it was sent in."""
    table: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        turn = speaker_turn(row)
        if turn is None:
            continue
        target, others, said = turn
        if others:  # what the target must be told apart from
            target = f"{target} (other: {', '.join(others)})"
        table[target][said].append(float(row.get("success") or 0.0))
    return table


def render(table: dict[str, dict[str, list[float]]], top: int = 3) -> str:
    """One Markdown table: each target, its most frequent utterances, and the success after each."""
    lines = [
        "| target (other objects) | what the speaker sent (episodes, success after it) |",
        "| --- | --- |",
    ]
    for target in sorted(table):
        said = sorted(table[target].items(), key=lambda kv: (-len(kv[1]), kv[0]))
        cells = [f"{k} ({len(v)}, {sum(v) / len(v):.2f})" for k, v in said[:top]]
        rest = sum(len(v) for _, v in said[top:])
        if rest:
            cells.append(f"{rest} other")
        lines.append(f"| {target} | {'; '.join(cells)} |")
    return "\n".join(lines)


def by_step(folder: Path) -> str:
    """One Markdown row per step's dump in ``folder`` (``STEP.jsonl``)."""
    lines = [
        "| step | the speaker's words tell the target apart | the listener picks the object named |",
        "| --- | --- | --- |",
    ]
    for path in sorted(folder.glob("*.jsonl"), key=lambda p: int(p.stem)):
        rows = _read(path)
        turns = [t for t in map(speaker_turn, rows) if t is not None]
        apart = sum(tells_apart(*t) for t in turns)
        follows = [f for f in map(listener_follows, rows) if f is not None]
        lines.append(f"| {path.stem} | {apart}/{len(turns)} | {sum(follows)}/{len(follows)} |")
    return "\n".join(lines)


def _context(target: str, others: list[str]) -> str:
    """Which of the target's words (by place) every other object shares: ``same word 1``, ...,
    or ``shares none``."""
    words = target.split()
    same = [
        str(i + 1)
        for i, w in enumerate(words)
        if others and all(i < len(o.split()) and o.split()[i] == w for o in others)
    ]
    return f"same word {', '.join(same)}" if same else "shares none"


def _word_kind(target: str, said: str) -> str:
    """``word N`` when the speaker sent the target's N-th word first, else what it sent."""
    if not said.startswith("say "):
        return said
    first = said.removeprefix("say ").strip('"').split()[0]
    words = target.split()
    return f"word {words.index(first) + 1}" if first in words else "another word"


def signal(folder: Path, every: int = 5) -> str:
    """One Markdown row per ``every`` steps of dumps in ``folder``: for each context (what the
    target shares with the other objects), each kind of word's summed group-centred score and
    its rows. Groups are verl's prompt uid (the part before the first ``_``), the speaker's
    copies of one episode."""
    blocks: dict[int, dict[str, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for path in folder.glob("*.jsonl"):
        groups: dict[str, list[tuple[str, str, float]]] = defaultdict(list)
        for row in _read(path):
            turn = speaker_turn(row)
            if turn is not None:
                target, others, said = turn
                group = str(row.get("uid", "")).split("_")[0]
                groups[group].append(
                    (_context(target, others), _word_kind(target, said), float(row["score"]))
                )
        for rows in groups.values():
            mean = sum(score for *_, score in rows) / len(rows)
            for context, kind, score in rows:
                blocks[int(path.stem) // every * every][context][kind].append(score - mean)
    lines = [
        "| steps | context | each word sent: summed centred score (rows) |",
        "| --- | --- | --- |",
    ]
    for start in sorted(blocks):
        for context in sorted(blocks[start]):
            cells = [
                f"{kind}: {sum(v):+.2f} ({len(v)})"
                for kind, v in sorted(blocks[start][context].items())
            ]
            lines.append(f"| {start}-{start + every - 1} | {context} | {'; '.join(cells)} |")
    return "\n".join(lines)


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main(argv: list[str]) -> int:
    """Print the tables; returns an exit code."""
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] in ("--by-step", "--signal"):
        table = by_step if argv[0] == "--by-step" else signal
        for folder in argv[1:]:
            print(f"{folder}\n\n{table(Path(folder))}\n")
        return 0
    for name in argv:
        rows = _read(Path(name))
        print(f"{name} ({len(rows)} rows)\n\n{render(protocol(rows))}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

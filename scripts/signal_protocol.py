"""The protocol a trained signal-v0 speaker uses: what it sends for each target (the words within
its word budget, as the listener reads them), read from verl's validation dump
(``trainer.validation_data_dir``), and how often the listener then picks right.

    python scripts/signal_protocol.py runs/sig-s0/val/0.jsonl runs/sig-s0/val/40.jsonl

Each dump row is one seat's trajectory of one held-out episode (verl's ``input``: the seat's
first prompt; ``output``: its replies and the env's later turns as decoded text). The speaker's
row is the one whose prompt says "You are the speaker"; its first reply is parsed with the env's
own parser (:func:`teamgym.envs.parsing.parse_reply`). Prints one Markdown table per dump.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
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


def protocol(rows: list[dict]) -> dict[str, Counter]:
    """Target (and the other objects) -> counts of what the speaker sent, and ``success`` per
    (target, sent) pair."""
    table: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        prompt = row["input"]
        if "You are the speaker" not in prompt:
            continue
        match = re.search(r"The target is: (.+)", prompt)
        if match is None:
            continue
        target = match.group(1).strip()
        others = [
            o.strip() for o in re.findall(r"^\d+\. (.+)$", prompt, re.M) if o.strip() != target
        ]
        if others:  # what the target must be told apart from
            target = f"{target} (other: {', '.join(others)})"
        budget = re.search(r"Describe it in at most (\d+) words", prompt)
        said = speaker_said(row["output"], int(budget.group(1)) if budget else None)
        table[target][said] += 1
        table[target][("success", said)] += float(row.get("success") or 0.0)
    return table


def render(table: dict[str, Counter], top: int = 3) -> str:
    """One Markdown table: each target, its most frequent utterances, and the success after each."""
    lines = [
        "| target (other objects) | what the speaker sent (episodes, success after it) |",
        "| --- | --- |",
    ]
    for target in sorted(table):
        counts = table[target]
        said = sorted(
            ((k, v) for k, v in counts.items() if isinstance(k, str)),
            key=lambda kv: (-kv[1], kv[0]),
        )
        cells = [f"{k} ({v}, {counts[('success', k)] / v:.2f})" for k, v in said[:top]]
        rest = sum(v for _, v in said[top:])
        if rest:
            cells.append(f"{rest} other")
        lines.append(f"| {target} | {'; '.join(cells)} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print each dump's protocol table; returns an exit code."""
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for name in argv:
        rows = [json.loads(line) for line in Path(name).read_text().splitlines() if line.strip()]
        print(f"{name} ({len(rows)} rows)\n")
        print(render(protocol(rows)))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

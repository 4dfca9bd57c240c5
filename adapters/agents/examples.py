"""Worked examples: one turn of the env's ``expert``, shown to an LLM agent before its first turn.

A small instruct model (SmolLM2-135M) given only the env's instructions never writes an
``<action>`` tag; shown one turn of another episode as a user message and the expert's reply,
it answers in the format (issue 43). :func:`worked_examples` plays the expert on a copy of the
env, on :data:`EXAMPLE_SEED` (outside the training and evaluation seed ranges), and takes each
agent's first turn that had a choice (a listener's forced ``wait`` teaches nothing). The same
env, arguments and agent give the same example on every machine; :func:`next_chat` puts it
between the system message and the first observation.
"""

from __future__ import annotations

import copy
from typing import Any

from teamgym.envs.lineup import Lineup
from teamgym.envs.registration import registry, spec

__all__ = ["EXAMPLE_HEADER", "EXAMPLE_SEED", "Message", "examples_if", "worked_examples"]

Message = dict[str, str]

#: The episode the examples come from: above every default evaluation range (1 000 000 up).
EXAMPLE_SEED = 2**31 - 1
#: The first line of an example's user message, so the model can tell it from the real game.
EXAMPLE_HEADER = "An example turn from another game, answered by an expert:\n\n"
#: Steps played at most while looking for every agent's first turn with a choice.
MAX_EXAMPLE_STEPS = 50


def _expert_env_id(env: Any) -> str:
    """A registered id built by ``env``'s class that has an ``expert`` baseline (versions of
    one class share their baselines); ``ValueError`` when none has."""
    for env_id in registry():
        s = spec(env_id)
        if "expert" not in s.baselines:
            continue
        try:
            built_by = s.load()
        except (ImportError, AttributeError):
            continue
        if built_by is type(env):
            return env_id
    raise ValueError(
        f"example: true needs the env's expert baseline, and no registered env of class "
        f"{type(env).__name__} has one; drop the example option for this env"
    )


def worked_examples(env: Any) -> dict[str, list[Message]]:
    """For each agent of ``env``, ``[user: header + observation, assistant: the expert's
    reply]`` from its first turn with more than one valid action on :data:`EXAMPLE_SEED`
    (agents that never had a choice in :data:`MAX_EXAMPLE_STEPS` steps get none). ``env`` is
    copied, never stepped."""
    env_id = _expert_env_id(env)
    try:
        game = copy.deepcopy(env)
    except Exception as exc:  # an env holding a process or a socket (the thor backend)
        raise ValueError(
            f"example: true cannot copy this {type(env).__name__} to play the example ({exc}); "
            "drop the example option for this env"
        ) from None
    observations, infos = game.reset(seed=EXAMPLE_SEED)
    seats = dict.fromkeys(game.possible_agents, "expert")
    lineup = Lineup.build(env_id, seats, share=True).start(game, EXAMPLE_SEED)
    last = dict(infos)
    out: dict[str, list[Message]] = {}
    for _ in range(MAX_EXAMPLE_STEPS):
        if not game.agents or len(out) == len(game.possible_agents):
            break
        actions = {a: lineup.act(a, observations[a], last[a]) for a in game.agents}
        for a in game.agents:
            if a not in out and len(last[a].get("valid_actions", ())) > 1:
                out[a] = [
                    {"role": "user", "content": EXAMPLE_HEADER + str(observations[a])},
                    {"role": "assistant", "content": actions[a]},
                ]
        observations, _, _, _, infos = game.step(actions)
        last.update(infos)
    game.close()
    return out


def examples_if(shown: bool, env: Any) -> dict[str, list[Message]] | None:
    """The worked examples of ``env`` when the agent shows them (its ``example`` option), else
    None: what the LLM agent kinds hand their episode's chats."""
    return worked_examples(env) if shown else None

"""IPPO and MAPPO on any teamgym env in vector mode: CleanRL's PPO, one policy shared by the
agents (parameter sharing), illegal actions masked out.

Both learn from each agent's own (individual) reward, or with ``--sharing W`` from a mix of it
and the team's (:class:`~teamgym.envs.sharing.RewardSharing`), with the same actor on the
agent's own observation; they differ in the critic. **IPPO**: the critic sees what the actor sees.
**MAPPO**: a centralised critic on ``env.state()`` (in vector mode, every agent's vector
concatenated: what the whole team sees) and the agent's one-hot seat. One file for both,
since the rest of the loop is the same line for line: ``--algo`` picks the critic.

Training episodes draw their seeds below ``EVAL_SEED_BASE``; the policy is evaluated on the
held-out evaluation seeds (those of ``teamgym baselines``), sampled and greedy, with the
success, score, team return and division of labour (roles, subtasks per seat, contribution
Gini) of :class:`~teamgym.envs.metrics.EpisodeMetrics`.

    python -m teamgym.benchmarks.marl.ppo --env keydoor-v0 --env-args difficulty=easy --algo mappo
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from teamgym.envs import make
from teamgym.envs.events import add_subtask_credit
from teamgym.envs.metrics import EpisodeTracker
from teamgym.envs.seeds import eval_seeds
from teamgym.envs.sharing import RewardSharing
from teamgym.names import EVAL_SEED_BASE

__all__ = [
    "Args",
    "Episodes",
    "Labour",
    "Policy",
    "evaluate",
    "greedy",
    "parse_env_args",
    "sampled",
    "summarize",
    "train",
]

#: (observations, legal-action masks) of a batch of agents -> their actions.
Policy = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Args:
    """One run: the env, the algorithm and CleanRL's PPO settings."""

    env: str = "foraging-v1"
    """A registered env id (played in vector mode)."""
    env_args: tuple[str, ...] = ()
    """Constructor arguments as KEY=VALUE (values read as YAML scalars), e.g. difficulty=easy."""
    algo: Literal["ippo", "mappo"] = "ippo"
    """ippo: the critic sees the agent's observation; mappo: env.state() and the seat."""
    seed: int = 1
    """Seeds the network, the sampling and the training episodes' seeds."""
    total_steps: int = 100_000
    """Env steps (each gives one sample per agent)."""
    num_envs: int = 16
    """Envs stepped side by side."""
    num_steps: int = 128
    """Steps per env in each rollout."""
    learning_rate: float = 1e-3
    """Adam step size, annealed linearly to 0."""
    gamma: float = 0.99
    """Discount."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    num_minibatches: int = 4
    """Minibatches per epoch."""
    update_epochs: int = 4
    """Epochs over each rollout."""
    clip_coef: float = 0.2
    """PPO clip range."""
    ent_coef: float = 0.01
    """Entropy bonus."""
    vf_coef: float = 0.5
    """Value loss weight."""
    max_grad_norm: float = 0.5
    """Gradient clipping."""
    hidden: int = 64
    """Width of the two hidden layers of the actor and of the critic."""
    eval_episodes: int = 100
    """Held-out episodes per evaluation (the evaluation seeds of ``teamgym baselines``)."""
    sharing: float = 0.0
    """Weight of the team score in each agent's trained reward (``RewardSharing``, mixed, team
    = sum): 0 trains on individual rewards, 1 on the team's. Evaluation is the env's either way."""


def parse_env_args(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings as constructor arguments (values read as YAML scalars)."""
    import yaml

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"env argument {pair!r} is not KEY=VALUE")
        out[key] = yaml.safe_load(value)
    return out


def _layer(n_in: int, n_out: int, std: float = float(np.sqrt(2))) -> nn.Linear:
    """A linear layer with CleanRL's orthogonal initialisation."""
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.constant_(lin.bias, 0.0)
    return lin


def _mlp(n_in: int, n_out: int, hidden: int, std: float) -> nn.Sequential:
    return nn.Sequential(
        _layer(n_in, hidden),
        nn.Tanh(),
        _layer(hidden, hidden),
        nn.Tanh(),
        _layer(hidden, n_out, std),
    )


class Agent(nn.Module):
    """The shared actor (own observation, masked logits) and the critic (its input per algo)."""

    def __init__(self, obs_dim: int, critic_dim: int, n_actions: int, hidden: int) -> None:
        super().__init__()
        self.actor = _mlp(obs_dim, n_actions, hidden, 0.01)
        self.critic = _mlp(critic_dim, 1, hidden, 1.0)

    def value(self, c: torch.Tensor) -> torch.Tensor:
        """The critic's value of critic inputs ``c``."""
        return self.critic(c).squeeze(-1)

    def act(
        self, x: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log-prob, entropy); illegal actions get no probability."""
        dist = Categorical(logits=self.actor(x).masked_fill(~mask, -1e9))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy()


class Labour:
    """One episode's bookkeeping: its metrics, the completed-subtask credit of each seat and
    the role each seat played (``role`` events), for :func:`summarize`."""

    def __init__(self, agents: list[str]) -> None:
        self.agents = agents
        self.tracker = EpisodeTracker(agents)
        self.credit: dict[str, float] = {}
        self.roles: dict[str, str] = {}

    def step(self, rewards: dict[str, float], infos: dict[str, Any]) -> None:
        """Count one step's rewards and events."""
        self.tracker.step(rewards, infos)
        first: dict[str, Any] = next(iter(infos.values()), {})  # events: the same for all
        for event in first.get("events", []):
            if event["type"] == "subtask_completed":
                add_subtask_credit(self.credit, event)
            elif event["type"] == "role":
                self.roles[event["agent"]] = event["role"]

    def record(self) -> dict[str, Any]:
        """The finished episode, JSON-ready."""
        metrics = self.tracker.metrics()
        return {
            "success": bool(metrics.success),
            "score": float(metrics.score),
            "team_return": float(metrics.team_return),
            "length": int(metrics.episode_length),
            "gini": metrics.contribution_gini,
            "credit": [self.credit.get(a, 0.0) for a in self.agents],
            "roles": [self.roles.get(a) for a in self.agents],
        }


class Episodes:
    """``n`` envs of one setting in vector mode: stacks the agents' inputs (rows env-major,
    ``e * N + i``), steps them and keeps the finished episodes' records."""

    def __init__(self, args: Args, n: int) -> None:
        kwargs = parse_env_args(args.env_args)
        self.envs = [make(args.env, obs_mode="vector", **kwargs) for _ in range(n)]
        self.agents = list(self.envs[0].possible_agents)
        self.algo = args.algo
        self.sharing = RewardSharing(weight=args.sharing) if args.sharing else None
        self.obs: list[dict[str, Any]] = [{} for _ in range(n)]
        self.labour = [Labour(self.agents) for _ in range(n)]
        self.finished: list[dict[str, Any]] = []

    def reset(self, e: int, seed: int) -> None:
        """Start env ``e`` on ``seed``."""
        self.obs[e] = self.envs[e].reset(seed=seed)[0]
        self.labour[e] = Labour(self.agents)

    def inputs(self, envs: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Observations, masks and critic inputs of every agent of ``envs``."""
        rows = [self.obs[e][a] for e in envs for a in self.agents]
        x = torch.from_numpy(np.stack([r["observation"] for r in rows]))
        mask = torch.from_numpy(np.stack([r["action_mask"] for r in rows])).bool()
        if self.algo == "ippo":
            return x, mask, x
        seats = np.eye(len(self.agents), dtype=np.float32)
        states = [np.asarray(self.envs[e].state(), dtype=np.float32) for e in envs]
        c = [np.concatenate([state, seat]) for state in states for seat in seats]
        return x, mask, torch.from_numpy(np.stack(c))

    def step(self, e: int, actions: list[int]) -> tuple[list[float], bool]:
        """Step env ``e`` (one action per agent); (the rewards each agent trains on, shared
        under ``Args.sharing``; whether it ended). The episode records keep the env's own."""
        env = self.envs[e]
        self.obs[e], rewards, _, _, infos = env.step(dict(zip(self.agents, actions, strict=True)))
        self.labour[e].step(rewards, infos)
        if not env.agents:
            self.finished.append(self.labour[e].record())
        trained = self.sharing(rewards) if self.sharing else rewards
        return [float(trained.get(a, 0.0)) for a in self.agents], not env.agents


def evaluate(policy: Policy, args: Args) -> dict[str, Any]:
    """Play the held-out seeds, all episodes side by side: means of success, score, team
    return and length; the division of labour (completed-subtask credit per seat, contribution
    Gini, each seat's roles)."""
    seeds = eval_seeds(0, args.eval_episodes)
    episodes = Episodes(args, len(seeds))
    for e, s in enumerate(seeds):
        episodes.reset(e, s)
    live, n = list(range(len(seeds))), len(episodes.agents)
    while live:
        x, mask, _ = episodes.inputs(live)
        with torch.no_grad():
            actions = policy(x, mask).tolist()
        live = [
            e for j, e in enumerate(live) if not episodes.step(e, actions[j * n : (j + 1) * n])[1]
        ]
    return summarize(episodes.finished, episodes.agents)


def summarize(finished: list[dict[str, Any]], agents: list[str]) -> dict[str, Any]:
    """Means over episodes, and the division of labour, JSON-ready."""
    ginis = [f["gini"] for f in finished if f["gini"] is not None]
    roles = {
        a: dict(Counter(f["roles"][i] for f in finished if f["roles"][i]).most_common())
        for i, a in enumerate(agents)
    }
    return {
        "episodes": len(finished),
        "success_rate": float(np.mean([f["success"] for f in finished])),
        "score": float(np.mean([f["score"] for f in finished])),
        "team_return": float(np.mean([f["team_return"] for f in finished])),
        "episode_length": float(np.mean([f["length"] for f in finished])),
        "contribution_gini": float(np.mean(ginis)) if ginis else None,
        "subtasks_per_seat": {
            a: float(np.mean([f["credit"][i] for f in finished])) for i, a in enumerate(agents)
        },
        "roles": {a: r for a, r in roles.items() if r},
    }


def train(args: Args, log: Callable[[str], None] = print) -> tuple[Agent, dict[str, list[float]]]:
    """CleanRL's PPO loop; each (env, agent) pair is one sample stream. Returns the agent and
    its curve (env steps; success and score of the last 100 training episodes)."""
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)
    run = Episodes(args, args.num_envs)
    for e in range(args.num_envs):
        run.reset(e, int(rng.integers(EVAL_SEED_BASE)))
    n_agents, n_streams = len(run.agents), args.num_envs * len(run.agents)
    everyone = list(range(args.num_envs))
    next_x, next_mask, next_c = run.inputs(everyone)
    agent = Agent(next_x.shape[1], next_c.shape[1], next_mask.shape[1], args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    batch = args.num_envs * args.num_steps * n_agents
    minibatch = batch // args.num_minibatches
    iterations = max(1, args.total_steps // (args.num_envs * args.num_steps))
    shape = (args.num_steps, n_streams)
    x_buf, c_buf = torch.zeros((*shape, next_x.shape[1])), torch.zeros((*shape, next_c.shape[1]))
    mask_buf = torch.zeros((*shape, next_mask.shape[1]), dtype=torch.bool)
    actions, logprobs = torch.zeros(shape, dtype=torch.long), torch.zeros(shape)
    rewards, dones, values = torch.zeros(shape), torch.zeros(shape), torch.zeros(shape)
    next_done = torch.zeros(n_streams)
    curve: dict[str, list[float]] = {"env_steps": [], "success_rate": [], "score": []}
    global_step = 0
    for iteration in range(1, iterations + 1):
        optimizer.param_groups[0]["lr"] = (
            1.0 - (iteration - 1.0) / iterations
        ) * args.learning_rate
        for step in range(args.num_steps):  # collect; a finished episode resets at once
            global_step += args.num_envs
            x_buf[step], mask_buf[step], c_buf[step], dones[step] = (
                next_x,
                next_mask,
                next_c,
                next_done,
            )
            with torch.no_grad():
                action, logprob, _ = agent.act(next_x, next_mask)
                values[step] = agent.value(next_c)
            actions[step], logprobs[step] = action, logprob
            done = torch.zeros(n_streams)
            chosen = action.tolist()
            for e in everyone:
                rows = slice(e * n_agents, (e + 1) * n_agents)
                r, ended = run.step(e, chosen[rows])
                rewards[step, rows] = torch.tensor(r)
                if ended:
                    done[rows] = 1.0
                    run.reset(e, int(rng.integers(EVAL_SEED_BASE)))
            next_x, next_mask, next_c = run.inputs(everyone)
            next_done = done
        with torch.no_grad():  # generalised advantage estimation
            next_value = agent.value(next_c)
            advantages, last = torch.zeros_like(rewards), torch.zeros(n_streams)
            for t in reversed(range(args.num_steps)):
                nonterminal = 1.0 - (next_done if t == args.num_steps - 1 else dones[t + 1])
                following = next_value if t == args.num_steps - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * following * nonterminal - values[t]
                last = delta + args.gamma * args.gae_lambda * nonterminal * last
                advantages[t] = last
            returns = advantages + values
        _update(
            agent,
            optimizer,
            args,
            batch,
            minibatch,
            (x_buf, mask_buf, c_buf, actions, logprobs, advantages, returns),
        )
        recent = run.finished[-100:]
        if recent:
            curve["env_steps"].append(global_step)
            curve["success_rate"].append(float(np.mean([f["success"] for f in recent])))
            curve["score"].append(float(np.mean([f["score"] for f in recent])))
            log(
                f"{args.env} {args.algo} seed {args.seed} step {global_step}: success "
                f"{curve['success_rate'][-1]:.2f}, score {curve['score'][-1]:.3f}"
            )
    return agent, curve


def _update(
    agent: Agent,
    optimizer: torch.optim.Optimizer,
    args: Args,
    batch: int,
    minibatch: int,
    buffers: tuple[torch.Tensor, ...],
) -> None:
    """PPO's clipped update on the flattened rollout, ``update_epochs`` times."""
    x, mask, c, act, logp, adv, ret = (b.reshape(batch, -1).squeeze(-1) for b in buffers)
    for _ in range(args.update_epochs):
        order = torch.randperm(batch)
        for start in range(0, batch, minibatch):
            mb = order[start : start + minibatch]
            _, newlogp, entropy = agent.act(x[mb], mask[mb], act[mb])
            ratio = (newlogp - logp[mb]).exp()
            mb_adv = (adv[mb] - adv[mb].mean()) / (adv[mb].std() + 1e-8)
            clipped = ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
            pg_loss = torch.max(-mb_adv * ratio, -mb_adv * clipped).mean()
            v_loss = 0.5 * ((agent.value(c[mb]) - ret[mb]) ** 2).mean()
            loss = pg_loss - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()


def greedy(agent: Agent) -> Policy:
    """The agent's most likely legal action."""
    return lambda x, mask: agent.actor(x).masked_fill(~mask, -1e9).argmax(-1)


def sampled(agent: Agent, seed: int = 0) -> Policy:
    """An action drawn from the agent's policy, from its own generator (seeded: the same
    evaluation twice plays the same episodes)."""
    generator = torch.Generator().manual_seed(seed)

    def pick(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(agent.actor(x).masked_fill(~mask, -1e9), dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    return pick


if __name__ == "__main__":  # the CLI lives in cli.py (run, not imported: cli imports this)
    import runpy

    runpy.run_module("teamgym.benchmarks.marl.cli", run_name="__main__")

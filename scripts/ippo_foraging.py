"""IPPO on ``foraging-v0`` in vector mode: CleanRL's PPO with one policy shared by the agents.

Each agent acts on its own observation (independent actor and critic, parameters shared, legal
actions from the env's mask) and learns from its own reward. After training, the policy plays
held-out seeds (never used in training) next to the random policy (uniform over legal actions)
and the scripted expert (privileged: it plans on the true field), in the same episodes.

    python scripts/ippo_foraging.py                      # 3 seeds: docs/ippo-foraging.png
    python scripts/ippo_foraging.py --seeds 1 --total-steps 4096 --out-dir /tmp/ippo

Writes ``<out-dir>/summary.json`` (curves and held-out results per seed) and the curve PNG
``--plot``. Needs torch and matplotlib (the ``train`` extra); runs on CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from teamgym.envs import make
from teamgym.envs.baselines import make_baseline
from teamgym.envs.lineup import run_episode

#: (observations, legal-action masks) of a batch of agents -> their actions.
Policy = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Args:
    seeds: tuple[int, ...] = (1, 2, 3)
    """Training seeds: one run each, trained one after the other."""
    difficulty: str = "easy"
    """foraging-v0 preset: easy (6x6, 2 items), medium or hard."""
    num_agents: int = 2
    """Team size."""
    force_coop: bool = True
    """Every item needs the whole team loading it together (--no-force-coop: not always)."""
    total_steps: int = 100_000
    """Env steps per seed (each gives one sample per agent)."""
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
    eval_episodes: int = 500
    """Held-out episodes per policy at the end."""
    eval_seed: int = 1_000_000
    """Held-out episodes use seeds eval_seed, eval_seed + 1, ...; training seeds are below."""
    out_dir: str = "runs/ippo_foraging"
    """Where summary.json goes."""
    plot: str = "docs/ippo-foraging.png"
    """Curve PNG ('' for none)."""
    threads: int = 1
    """torch CPU threads."""


def parse_args() -> Args:
    """One ``--flag`` per field of Args."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if isinstance(f.default, tuple):
            parser.add_argument(flag, type=int, nargs="+", default=f.default)
        elif isinstance(f.default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
        else:
            parser.add_argument(flag, type=type(f.default), default=f.default)
    ns = vars(parser.parse_args())
    return Args(**{**ns, "seeds": tuple(ns["seeds"])})


def layer(n_in: int, n_out: int, std: float = np.sqrt(2)) -> nn.Linear:
    """A linear layer with CleanRL's orthogonal initialisation."""
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.constant_(lin.bias, 0.0)
    return lin


class Agent(nn.Module):
    """Actor and critic MLPs on one agent's observation; illegal actions get no probability."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer(obs_dim, hidden),
            nn.Tanh(),
            layer(hidden, hidden),
            nn.Tanh(),
            layer(hidden, 1, 1.0),
        )
        self.actor = nn.Sequential(
            layer(obs_dim, hidden),
            nn.Tanh(),
            layer(hidden, hidden),
            nn.Tanh(),
            layer(hidden, n_actions, 0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def get_action_and_value(
        self, x: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        dist = Categorical(logits=self.actor(x).masked_fill(~mask, -1e9))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.get_value(x)


def stack(obs: list[dict[str, Any]], agents: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Observations and masks of every (env, agent), env-major: rows ``e * N + i``."""
    x = np.stack([o[a]["observation"] for o in obs for a in agents])
    m = np.stack([o[a]["action_mask"] for o in obs for a in agents])
    return torch.from_numpy(x), torch.from_numpy(m).bool()


def env_kwargs(args: Args) -> dict[str, Any]:
    """foraging-v0's options from Args."""
    return {
        "num_agents": args.num_agents,
        "difficulty": args.difficulty,
        "force_coop": args.force_coop,
    }


def summarize(team_return: Any, success: Any, length: Any) -> dict[str, float]:
    """Means over episodes, JSON-ready."""
    return {
        "success_rate": float(np.mean(success)),
        "team_return": float(np.mean(team_return)),
        "episode_length": float(np.mean(length)),
        "episodes": len(team_return),
    }


def evaluate(policy: Policy, args: Args) -> dict[str, float]:
    """Play the held-out seeds, all episodes side by side; ``policy(x, mask) -> actions``."""
    seeds = range(args.eval_seed, args.eval_seed + args.eval_episodes)
    envs = [make("foraging-v0", obs_mode="vector", **env_kwargs(args)) for _ in seeds]
    obs = [env.reset(seed=s)[0] for env, s in zip(envs, seeds, strict=True)]
    agents = envs[0].possible_agents
    team_return, success, length = np.zeros(len(envs)), np.zeros(len(envs)), np.zeros(len(envs))
    live = list(range(len(envs)))
    while live:
        with torch.no_grad():
            actions = policy(*stack([obs[e] for e in live], agents)).numpy()
        for j, e in enumerate(live):
            act = {a: int(actions[j * len(agents) + i]) for i, a in enumerate(agents)}
            obs[e], rewards, terms, _, _ = envs[e].step(act)
            team_return[e] += sum(rewards.values())
            length[e] += 1
            success[e] = any(terms.values())  # foraging-v0 terminates when the field is clear
        live = [e for e in live if envs[e].agents]
    return summarize(team_return, success, length)


def train(args: Args, seed: int) -> tuple[Agent, dict[str, list[float]]]:
    """CleanRL's PPO loop; each (env, agent) pair is one sample stream."""
    # 1. Seeding, envs, agent.
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    envs = [
        make("foraging-v0", obs_mode="vector", **env_kwargs(args)) for _ in range(args.num_envs)
    ]
    agents = envs[0].possible_agents
    n_agents, n_streams = len(agents), args.num_envs * len(agents)
    obs_dim = envs[0].observation_space(agents[0])["observation"].shape[0]
    agent = Agent(obs_dim, int(envs[0].action_space(agents[0]).n), args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    batch_size = args.num_envs * args.num_steps * n_agents
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = max(1, args.total_steps // (args.num_envs * args.num_steps))

    # 2. Rollout storage (time x stream).
    shape = (args.num_steps, n_streams)
    obs_buf = torch.zeros((*shape, obs_dim))
    mask_buf = torch.zeros((*shape, envs[0].action_space(agents[0]).n), dtype=torch.bool)
    actions, logprobs = torch.zeros(shape, dtype=torch.long), torch.zeros(shape)
    rewards, dones, values = torch.zeros(shape), torch.zeros(shape), torch.zeros(shape)

    # Training episodes draw seeds below eval_seed, so evaluation seeds stay unseen.
    def new_seed() -> int:
        return int(rng.integers(args.eval_seed))

    raw_obs = [env.reset(seed=new_seed())[0] for env in envs]
    next_obs, next_mask = stack(raw_obs, agents)
    next_done = torch.zeros(n_streams)
    ep_return = np.zeros(args.num_envs)
    finished: list[tuple[float, bool]] = []  # (team return, success) of training episodes
    curve: dict[str, list[float]] = {"env_steps": [], "success_rate": [], "team_return": []}
    global_step = 0

    for iteration in range(1, num_iterations + 1):
        frac = 1.0 - (iteration - 1.0) / num_iterations
        optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        # 3. Collect num_steps steps in every env; a finished episode resets at once.
        for step in range(args.num_steps):
            global_step += args.num_envs
            obs_buf[step], mask_buf[step], dones[step] = next_obs, next_mask, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs, next_mask)
            actions[step], logprobs[step], values[step] = action, logprob, value
            done = np.zeros(n_streams)
            for e, env in enumerate(envs):
                rows = slice(e * n_agents, (e + 1) * n_agents)
                act = {a: int(action[e * n_agents + i]) for i, a in enumerate(agents)}
                raw_obs[e], r, terms, _, _ = env.step(act)
                rewards[step, rows] = torch.tensor([r[a] for a in agents])
                ep_return[e] += sum(r.values())
                if not env.agents:
                    finished.append((ep_return[e], any(terms.values())))
                    ep_return[e], done[rows] = 0.0, 1.0
                    raw_obs[e] = env.reset(seed=new_seed())[0]
            next_obs, next_mask = stack(raw_obs, agents)
            next_done = torch.from_numpy(done).float()

        # 4. Generalised advantage estimation.
        with torch.no_grad():
            next_value = agent.get_value(next_obs)
            advantages = torch.zeros_like(rewards)
            lastgaelam = torch.zeros(n_streams)
            for t in reversed(range(args.num_steps)):
                nextnonterminal = 1.0 - (next_done if t == args.num_steps - 1 else dones[t + 1])
                nextvalues = next_value if t == args.num_steps - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                advantages[t] = lastgaelam
            returns = advantages + values

        # 5. PPO update on the flattened batch.
        b_obs, b_mask = obs_buf.reshape(-1, obs_dim), mask_buf.reshape(batch_size, -1)
        b_actions, b_logprobs = actions.reshape(-1), logprobs.reshape(-1)
        b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)
        for _ in range(args.update_epochs):
            order = torch.randperm(batch_size)
            for start in range(0, batch_size, minibatch_size):
                mb = order[start : start + minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb], b_mask[mb], b_actions[mb]
                )
                ratio = (newlogprob - b_logprobs[mb]).exp()
                mb_adv = b_advantages[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(
                    -mb_adv * ratio, -mb_adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
                ).mean()
                v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

        # 6. Log the training episodes that ended lately (up to 100).
        recent = finished[-100:]
        if recent:
            curve["env_steps"].append(global_step)
            curve["success_rate"].append(float(np.mean([s for _, s in recent])))
            curve["team_return"].append(float(np.mean([r for r, _ in recent])))
            print(
                f"seed {seed} step {global_step:>7}: success {curve['success_rate'][-1]:.2f}, "
                f"team return {curve['team_return'][-1]:.3f} (last {len(recent)} episodes)",
                flush=True,
            )
    return agent, curve


def expert_on_held_out(args: Args) -> dict[str, float]:
    """The scripted expert on the same held-out seeds (it plays the text view of each episode)."""
    env = make("foraging-v0", **env_kwargs(args))
    expert = make_baseline("foraging-v0", "expert")
    runs = [
        run_episode(env, expert, seed=s)
        for s in range(args.eval_seed, args.eval_seed + args.eval_episodes)
    ]
    return summarize(
        [m.team_return for m in runs], [m.success for m in runs], [m.episode_length for m in runs]
    )


def plot(summary: dict[str, Any], path: Path) -> None:
    """Training success and team return per seed (lines), each seed's held-out result (dots) and
    the baselines on the same held-out seeds (gray)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, key, label in zip(
        axes, ("success_rate", "team_return"), ("success rate", "team return"), strict=True
    ):
        for seed, run in summary["runs"].items():
            steps = run["curve"]["env_steps"]
            (line,) = ax.plot(steps, run["curve"][key], label=f"IPPO seed {seed}")
            ax.plot(steps[-1:], [run["sampled"][key]], "o", color=line.get_color())
        for name, style in (("expert", "--"), ("random", ":")):
            ax.axhline(
                summary[name][key], color="gray", linestyle=style, label=f"{name} (held out)"
            )
        ax.set_xlabel("env steps")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g}k"))
        ax.set_ylabel(f"{label} (last 100 training episodes)")
        ax.set_ylim(0, 1.05)
    axes[0].legend(loc="lower right", fontsize=8)
    a = summary["args"]
    coop = ", force_coop" if a["force_coop"] else ""
    fig.suptitle(
        f"IPPO on foraging-v0 ({a['difficulty']}{coop}, {a['num_agents']} agents, vector obs); "
        f"dots: held-out episodes ({a['eval_episodes']})",
        fontsize=11,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(args: Args) -> dict[str, Any]:
    """Train every seed, evaluate on held-out seeds, write the summary and the figure."""
    torch.set_num_threads(args.threads)
    start = time.time()
    summary: dict[str, Any] = {"args": dataclasses.asdict(args), "runs": {}}

    # Baselines on the held-out seeds: uniform over legal actions, and the scripted expert.
    gen = torch.Generator().manual_seed(0)

    def random_policy(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.multinomial(mask.float(), 1, generator=gen).squeeze(-1)

    summary["random"] = evaluate(random_policy, args)
    summary["expert"] = expert_on_held_out(args)

    for seed in args.seeds:
        t0 = time.time()
        agent, curve = train(args, seed)
        train_s = time.time() - t0

        def sampled(x: torch.Tensor, mask: torch.Tensor, agent: Agent = agent) -> torch.Tensor:
            return agent.get_action_and_value(x, mask)[0]

        def greedy(x: torch.Tensor, mask: torch.Tensor, agent: Agent = agent) -> torch.Tensor:
            return agent.actor(x).masked_fill(~mask, -1e9).argmax(-1)

        summary["runs"][str(seed)] = {
            "train_seconds": round(train_s, 1),
            "curve": curve,
            "sampled": evaluate(sampled, args),
            "greedy": evaluate(greedy, args),
        }
        run = summary["runs"][str(seed)]
        print(
            f"seed {seed}: held-out success {run['sampled']['success_rate']:.3f} sampled, "
            f"{run['greedy']['success_rate']:.3f} greedy; random "
            f"{summary['random']['success_rate']:.3f}, expert "
            f"{summary['expert']['success_rate']:.3f} ({train_s:.0f} s training)",
            flush=True,
        )
    summary["wall_seconds"] = round(time.time() - start, 1)

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    if args.plot:
        plot(summary, Path(args.plot))
    return summary


if __name__ == "__main__":
    main(parse_args())

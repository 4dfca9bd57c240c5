"""``teamgym play ENV``: a person plays one agent in the terminal; baselines play the others.
``--web`` serves a page in the browser instead (:mod:`.play_web`).

The person sees what the agent would see (its instructions once, then each turn its
observation and numbered valid actions) and types a reply (see
:mod:`teamgym.envs.typed_replies`); after each step come the feedback and the rewards, at the
end the episode's metrics and whether the team succeeded. A turn whose only valid action is ``wait`` (a listener while the
speaker talks, a Hanabi player on a teammate's turn) is shown and played for the person
(``--ask-on-wait`` asks anyway, e.g. to send a message while waiting). ``q``, end of input or
Ctrl-C quit cleanly.
"""

from __future__ import annotations

import argparse
import functools

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule
from rich.table import Table

from teamgym.adapters.agents.chat import forced_reply
from teamgym.cli.common import (
    CommandError,
    add_env_arg,
    bad_input,
    env_kwargs,
    non_negative_int,
    port,
    positive_int,
)
from teamgym.envs.metrics import EpisodeMetrics
from teamgym.envs.typed_replies import choices, how_to_reply, numbered, typed_reply

NAME = "play"
QUIT = ("q", "quit", "exit")


class _Quit(Exception):
    """The person asked to stop (``q``, end of input or Ctrl-C)."""


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare the command and its flags."""
    p = sub.add_parser(
        NAME, help="play one agent yourself in the terminal; baselines play the rest"
    )
    p.add_argument("env", help="env id, e.g. signal-v1")
    p.add_argument(
        "--agent", metavar="AGENT", help="the agent you play, e.g. robot_1 (default: the first)"
    )
    p.add_argument(
        "--teammates",
        action="append",
        default=[],
        metavar="SPEC",
        help="who plays the other agents (default: the env's expert if it has one, else "
        "random): a baseline in the terminal; with --web any agent spec (checkpoint:DIR, "
        "openai:MODEL@URL, ...), repeatable: the episodes are played with each",
    )
    p.add_argument("--seed", type=non_negative_int, default=0, metavar="N", help="episode seed")
    p.add_argument(
        "--ask-on-wait",
        action="store_true",
        help="ask on turns where 'wait' is the only valid action too (default: wait for you, "
        "so you type on your own turns only)",
    )
    add_env_arg(p)
    web = p.add_argument_group(
        "web page", "--web serves the game on a page in the browser instead of the terminal"
    )
    web.add_argument("--web", action="store_true", help="play in the browser (see the guide)")
    web.add_argument(
        "--name",
        action="append",
        default=[],
        metavar="NAME",
        help="a person at the table (repeatable: each gets a link and the next of the --agent "
        "seats, comma-separated there); default: player",
    )
    web.add_argument("--episodes", type=positive_int, default=1, help="episodes per teammate")
    web.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to serve on (default: loopback only; another host prints links with "
        "the token every request must carry)",
    )
    web.add_argument("--port", type=port, default=8765, help="port of the page (0: any free)")
    web.add_argument("--out", metavar="RUN_DIR", help="run directory (default: runs/play-NAME)")
    web.add_argument(
        "--replay",
        metavar="RUN_DIR",
        help="play RUN_DIR's recorded session again from its replies (no page) into --out, "
        "and check that every trajectory hash comes out the same",
    )
    return p


def run(args: argparse.Namespace, console: Console) -> int:
    """Play one episode; print its metrics (or that it was left unfinished)."""
    from teamgym.envs import EpisodeTracker, make, spec
    from teamgym.envs.lineup import Lineup

    web_only = {
        "--name": bool(args.name),
        "--episodes": args.episodes != 1,
        "--out": args.out is not None,
        "--host": args.host != "127.0.0.1",
        "--port": args.port != 8765,
    }
    if args.web or args.replay:
        if args.ask_on_wait:
            raise CommandError("--ask-on-wait is the terminal's; the page plays a lone 'wait'")
        from teamgym.cli.play_web import run_web

        return run_web(args, console)
    if any(web_only.values()):
        given = ", ".join(flag for flag, set_ in web_only.items() if set_)
        raise CommandError(f"{given} need --web (the terminal plays one episode, recording none)")
    if len(args.teammates) > 1:
        raise CommandError("the terminal takes one --teammates baseline; --web takes several")

    with bad_input(KeyError, TypeError, ValueError):
        env = make(args.env, **env_kwargs(args))
        baseline = (args.teammates or [None])[0] or (
            "expert" if "expert" in spec(args.env).baselines else "random"
        )
        seats = dict.fromkeys(env.possible_agents, baseline)  # one policy, slot 0
        policy = Lineup.build(args.env, seats, seed=args.seed, share=True)
    if getattr(env.unwrapped, "obs_mode", "text") != "text":
        raise CommandError("play needs text observations; drop --env-arg obs_mode=...")
    me = args.agent or env.possible_agents[0]
    if me not in env.possible_agents:
        raise CommandError(
            f"{args.env} has no agent {me!r}; agents: {', '.join(env.possible_agents)}"
        )

    obs, infos = env.reset(seed=args.seed)
    policy.start(env, args.seed)
    others = [a for a in env.possible_agents if a != me]
    say = functools.partial(console.print, markup=False, highlight=False, soft_wrap=True)
    console.print(
        f"You play [bold]{me}[/bold] in {args.env} (seed {args.seed}); "
        f"{', '.join(others)} played by the [bold]{escape(baseline)}[/bold] baseline."
    )
    # talk: whether anyone may send a message at the start (never in Hanabi, nor with
    # communication=False): the help then shows no message example
    game = env.unwrapped
    talk = game.communication and any(game.can_speak(a) for a in env.possible_agents)
    say(how_to_reply(talk, numbered(infos[me]["valid_actions"])))
    console.print(Rule("instructions"))
    say(infos[me]["instructions"])

    tracker, last_info, done_said = EpisodeTracker(env.possible_agents), dict(infos), False
    try:
        while env.agents:
            replies = {a: policy.act(a, obs[a], last_info[a]) for a in env.agents if a != me}
            if me in env.agents:
                console.print(Rule(f"step {tracker.length}"))
                say(obs[me])
                valid = list(last_info[me]["valid_actions"])
                waits = valid == ["wait"] and not args.ask_on_wait
                forced = forced_reply(valid) if waits else None
                if forced is not None:
                    replies[me] = forced
                    say(f"'wait' is your only move: sent: {forced}")
                else:
                    replies[me] = _ask(console, me, valid, talk)
                    say(f"sent: {replies[me]}")
            elif not done_said:
                say("Your part is over; your teammates play on.")
                done_said = True
            obs, rewards, _, _, infos = env.step(replies)
            last_info.update(infos)
            tracker.step(rewards, infos)
            if me in infos:  # the feedback opens the next observation; say it here at the end
                if me not in env.agents:
                    say(f"feedback: {infos[me]['feedback']}")
                say(f"reward: {rewards[me]:+.2f} (team this step: {sum(rewards.values()):+.2f})")
    except (_Quit, KeyboardInterrupt):
        console.print(f"\nQuit at step {tracker.length}; the episode was left unfinished.")
        return 0
    finally:
        env.close()
    _summary(console, me, tracker.metrics())
    return 0


def _ask(console: Console, me: str, valid: list[str], talk: bool) -> str:
    """Prompt until the person types a usable reply; :class:`_Quit` when they stop (``talk``:
    whether ``?`` shows how to send a message)."""
    console.print(
        "choose: " + choices(valid),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    while True:
        try:
            line = console.input(f"[bold]{me}>[/bold] ")
        except (EOFError, KeyboardInterrupt):
            raise _Quit from None
        if line.strip().lower() in QUIT:
            raise _Quit
        if line.strip() == "?":
            console.print(how_to_reply(talk, numbered(valid)), markup=False, highlight=False)
            continue
        try:
            return typed_reply(line, valid)
        except ValueError as exc:
            console.print(str(exc), style="yellow", markup=False, highlight=False, soft_wrap=True)


def _summary(console: Console, me: str, m: EpisodeMetrics) -> None:
    """The finished episode's metrics and verdict."""
    table = Table(title="episode metrics", show_header=False)
    rows = [
        ("success", "yes" if m.success else "no"),
        ("score", f"{m.score:.3f}"),
        ("steps", str(m.episode_length)),
        (f"your return ({me})", f"{m.returns.get(me, 0.0):.3f}"),
        ("team return", f"{m.team_return:.3f}"),
        (
            "collaboration index",
            "-" if m.collaboration_index is None else f"{m.collaboration_index:.3f}",
        ),
        ("communication frequency", f"{m.communication_frequency:.3f}"),
        ("invalid action rate", f"{m.invalid_action_rate:.3f}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    verdict = (
        "[green]The team succeeded.[/green]"
        if m.success
        else "[red]The team did not succeed.[/red]"
    )
    console.print(verdict)

"""``teamgym play``: a person at a real terminal (a pseudo-terminal) and in a pipe."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest

from teamgym.envs import make
from teamgym.envs.parsing import parse_reply
from teamgym.envs.signal.baselines import SignalExpert
from teamgym.envs.typed_replies import HOW_TO_REPLY, choices, how_to_reply, numbered, typed_reply

pty = pytest.importorskip("pty")  # POSIX only

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_TIMEOUT = 120.0  # seconds to wait for the next screen (a busy CI machine imports slowly)


class Terminal:
    """``python -m teamgym ARGS`` on a pseudo-terminal: type lines, read what is shown."""

    def __init__(self, *args: str) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: its stdin, stdout and stderr are the terminal
            # Ctrl-C reaches it as it reaches a program a person starts, even when this test
            # runs in a background job (whose shell leaves SIGINT ignored, inherited by exec)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            env = {**os.environ, "COLUMNS": "200", "LINES": "50"}
            os.execve(sys.executable, [sys.executable, "-m", "teamgym", *args], env)
        self.pid, self.fd, self.screen = pid, fd, ""

    def _read(self, deadline: float) -> bool:
        """Add what the terminal shows next to ``screen``; False once the program has exited."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not data:
            return False
        self.screen += _ANSI.sub("", data.decode(errors="replace").replace("\r\n", "\n"))
        return True

    def read_until(self, marker: str) -> str:
        """Everything shown until ``marker`` appears (counted from the last call), as text."""
        start, deadline = len(self.screen), time.monotonic() + _TIMEOUT
        while marker not in self.screen[start:]:
            if not self._read(deadline) or time.monotonic() > deadline:
                pytest.fail(
                    f"{marker!r} never appeared; the terminal showed:\n{self.screen[-3000:]}"
                )
        return self.screen[start:]

    def type(self, text: str) -> None:
        """Type ``text`` (a line needs its own newline)."""
        os.write(self.fd, text.encode())

    def finish(self) -> tuple[int, str]:
        """Wait for the program to exit: its exit status and what it showed last. A program
        still running at the deadline is killed and the test fails (never a hung suite)."""
        start, deadline = len(self.screen), time.monotonic() + _TIMEOUT
        while self._read(deadline) and time.monotonic() < deadline:
            pass
        done, status = os.waitpid(self.pid, os.WNOHANG)
        while not done and time.monotonic() < deadline:  # the terminal closes before the exit
            time.sleep(0.05)
            done, status = os.waitpid(self.pid, os.WNOHANG)
        if not done:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            os.close(self.fd)
            pytest.fail(f"still running after {_TIMEOUT:.0f}s; it showed:\n{self.screen[-3000:]}")
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status), self.screen[start:]


def _expert_moves(agent: str, seed: int, ask_on_wait: bool = False) -> list[str]:
    """What a person types to play ``agent`` of signal-v1 (2 agents) like the expert: 'say:
    WORDS' to speak, a pick by its number, a lone action by name; nothing on a turn whose only
    action is ``wait`` (``play`` sends it), unless ``ask_on_wait``."""
    env = make("signal-v1")
    obs, infos = env.reset(seed=seed)
    expert, moves = SignalExpert(), []
    while env.agents:
        replies = {a: expert.act(a, obs[a], infos[a]) for a in env.agents}
        parsed, valid = parse_reply(replies[agent]), infos[agent]["valid_actions"]
        if parsed.message:
            moves.append(f"say: {parsed.message}")
        elif len(valid) > 1:
            moves.append(str(valid.index(parsed.action) + 1))
        elif ask_on_wait or list(valid) != ["wait"]:
            moves.append(parsed.action)
        obs, _, _, _, infos = env.step(replies)
    return moves


def test_a_person_listens_then_speaks_and_the_team_succeeds() -> None:
    """robot_1 listens in round 1 and speaks in round 2, the expert plays robot_0: typing what
    the expert would do wins, and the screen shows every part of the game."""
    assert _expert_moves("robot_1", seed=0, ask_on_wait=True)[::3] == ["wait", "wait"]
    moves = _expert_moves("robot_1", seed=0)  # the two waits are played for the person
    assert len(moves) == 2 and moves[1].startswith("say: "), moves
    term = Terminal("play", "signal-v1", "--agent", "robot_1", "--seed", "0")

    pick = term.read_until("robot_1> ")
    assert "You play robot_1 in signal-v1 (seed 0); robot_0 played by the expert baseline" in pick
    assert "You are robot_1 in a team of 2 playing a referential game" in pick  # instructions
    assert "Round 1/2. robot_0 is the speaker. Your objects:\n1. " in pick  # the observation
    assert "'wait' is your only move: sent: <action>wait</action>" in pick
    assert "choose: 1) wait" not in pick
    assert "Step 1/4. You received a message from robot_0." in pick
    assert re.search(r"Messages:\n- robot_0: \w+", pick), pick
    assert "choose: 1) pick 1  2) pick 2  3) pick 3  4) pick 4" in pick

    term.type("9\n")  # not in the list: a hint, and the same turn again
    assert "9 is not a number from the list" in term.read_until("robot_1> ")
    term.type(f"{moves[0]}\n")
    speak = term.read_until("robot_1> ")
    assert f"sent: <action>pick {moves[0]}</action>" in speak
    assert "reward: +1.00 (team this step: +2.00)" in speak
    assert "Correct: the target was the" in speak and "You are the speaker. Objects:" in speak

    term.type(f"{moves[1]}\n")
    status, end = term.finish()
    words = moves[1].removeprefix("say: ")

    assert status == 0, end
    assert f"sent: <say>{words}</say><action>say</action>" in end
    assert "'wait' is your only move: sent: <action>wait</action>" in end  # the pick phase
    assert "feedback: Picks: robot_0 right." in end
    assert re.search(r"success\s*│\s*yes", end) and re.search(r"score\s*│\s*1\.000", end), end
    assert re.search(r"your return \(robot_1\)\s*│\s*2\.000", end), end
    assert "The team succeeded." in end
    assert term.screen.count("You are robot_1 in a team") == 1  # instructions shown once


@pytest.mark.parametrize("keys", ["q\n", "\x04", "\x03"], ids=["q", "end-of-input", "ctrl-c"])
def test_quitting_is_clean(keys: str) -> None:
    term = Terminal("play", "signal-v1")
    term.read_until("robot_0> ")
    time.sleep(0.5)  # the prompt is drawn before input() reads: a ^D typed earlier can be lost
    term.type(keys)
    status, end = term.finish()
    assert status == 0, end
    assert "Quit at step 0; the episode was left unfinished." in end
    assert "Traceback" not in term.screen


def test_play_in_a_pipe_as_the_speaker() -> None:
    """Typed lines from a pipe work too; the person speaks in round 1 (robot_0)."""
    moves = _expert_moves("robot_0", seed=3)
    proc = subprocess.run(
        [sys.executable, "-m", "teamgym", "play", "signal-v1", "--seed", "3"],
        input="\n".join(moves) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "You are the speaker. Objects:" in proc.stdout
    assert "The team succeeded." in proc.stdout


def test_ask_on_wait_asks_on_every_turn() -> None:
    """``--ask-on-wait``: the person types the waits too (to send a message while waiting)."""
    moves = _expert_moves("robot_0", seed=3, ask_on_wait=True)
    assert "wait" in moves and len(moves) > len(_expert_moves("robot_0", seed=3)), moves
    proc = subprocess.run(
        [sys.executable, "-m", "teamgym", "play", "signal-v1", "--seed", "3", "--ask-on-wait"],
        input="\n".join(moves) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "choose: 1) wait" in proc.stdout and "is your only move" not in proc.stdout
    assert "The team succeeded." in proc.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--agent", "robot_9"], "signal-v1 has no agent 'robot_9'; agents: robot_0, robot_1"),
        (["--teammates", "nobody"], "signal-v1 has no baseline 'nobody'"),
        (["--env-arg", "num_agent=3"], "accepted:"),
        (["--env-arg", "obs_mode=vector"], "play needs text observations"),
    ],
)
def test_bad_input_is_a_usage_error(args: list[str], expected: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "teamgym", "play", "signal-v1", *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2 and "error:" in proc.stdout, proc.stdout + proc.stderr
    assert expected in " ".join(proc.stdout.split()), proc.stdout


def test_typed_reply_short_forms_and_mistakes() -> None:
    valid = ["north", "south", "take", "wait"]
    assert typed_reply(" <action>dance</action> ", valid) == "<action>dance</action>"  # as typed
    assert typed_reply("TAKE.", valid) == "<action>take</action>"
    assert typed_reply("4 say:  meet  at the door", valid) == (
        "<say>meet at the door</say><action>wait</action>"
    )
    assert typed_reply("say: done", ["wait"]) == "<say>done</say><action>wait</action>"
    for line, error in [
        ("", "type an action"),
        ("0", "0 is not a number from the list"),
        ("dance", "'dance' is not a valid action now: 1) north  2) south"),
        ("say: hi", "also name the action"),
    ]:
        with pytest.raises(ValueError, match=re.escape(error)):
            typed_reply(line, valid)


def test_hanabi_actions_are_typed_by_name_not_by_a_number_that_misfires() -> None:
    """Issue 39: in hanabi-v0 choice ``1`` was ``discard 1`` and ``play 1`` was ``6``; where an
    action's number is not its place in the list, the list is not numbered and ``1`` is refused
    with what to type instead."""
    env = make("hanabi-v0")
    env.reset(seed=0)
    env.step({"robot_0": "<action>hint robot_1 red</action>", "robot_1": "<action>wait</action>"})
    _, _, _, _, infos = env.step(
        {"robot_0": "<action>wait</action>", "robot_1": "<action>hint robot_0 red</action>"}
    )
    valid = list(infos["robot_0"]["valid_actions"])  # a hint token spent: discards are legal
    assert valid.index("play 1") == 5 and "hint robot_1 1" in valid, valid
    assert not numbered(valid) and "1)" not in choices(valid) and "play 1 | " in choices(valid)
    assert typed_reply("play 1", valid) == "<action>play 1</action>"
    with pytest.raises(ValueError, match="type the action by name"):
        typed_reply("1", valid)
    assert numbered(["pick 1", "pick 2", "wait"]) and numbered(["north", "wait"])
    assert not numbered(["wait", "pick 1"])  # 'pick 1' is second: '1' would mean 'wait'


def test_the_help_shows_a_message_example_only_where_there_is_talk() -> None:
    """Issue 60: Hanabi's help offered "e.g. '1 say: small blue'"; Hanabi has no talk and its
    actions are typed by name."""
    assert "'1 say: small blue'" in HOW_TO_REPLY == how_to_reply(talk=True, by_number=True)
    hanabi = how_to_reply(talk=False, by_number=False)
    assert "say:" not in hanabi and "number" not in hanabi and "no talk" in hanabi
    proc = subprocess.run(
        [sys.executable, "-m", "teamgym", "play", "hanabi-v0"],
        input="?\nq\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(hanabi) == 2 and "say:" not in proc.stdout, proc.stdout

"""The reply parser: rules, fallback, and fuzzing (no crash, linear time)."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teamgym.envs.parsing import MAX_ACTION_CHARS, ParsedReply, normalize_action, parse_reply


@pytest.mark.parametrize(
    ("reply", "action", "message"),
    [
        ("<action>pick 2</action>", "pick 2", None),
        ("I think... <ACTION> Pick 2 </Action>", "Pick 2", None),
        ("< action >wait< / action >", "wait", None),
        ("<action>pick 1</action> no wait <action>pick 3</action>", "pick 3", None),
        ("<say>red circle</say><action>say</action>", "say", "red circle"),
        ("<say>a</say> <say> b c </say><action>pass</action>", "pass", "b c"),
        ("reasoning\n<action>pick 4", "pick 4", None),  # cut by a stop string
        ("<action>pick 4\nmore text after", "pick 4", None),
        ("<action><action>pick 1</action></action>", "pick 1", None),
        ("<action>pick <say>hi</say> 2</action>", None, "hi"),  # say inside action: action cut
        ("pick 2", "pick 2", None),  # fallback: bare last line
        ("Let me think.\n\npick 3\n", "pick 3", None),
        ("<say>blue</say>\nwait", "wait", "blue"),
    ],
)
def test_rules(reply: str, action: str | None, message: str | None) -> None:
    parsed = parse_reply(reply)
    if action is not None:
        assert parsed.action == action, parsed
    assert parsed.message == message, parsed


def test_say_inside_action_reads_the_action_before_it() -> None:
    parsed = parse_reply("<action>pick <say>hi</say> 2</action>")
    assert parsed.message == "hi"
    assert parsed.action == "pick", parsed  # the unclosed action ends at the <say> tag


def test_fallback_is_flagged_and_tags_win() -> None:
    assert parse_reply("pick 2").used_fallback
    assert not parse_reply("<action>pick 2</action>").used_fallback


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "no action"),
        ("   \n ", "no action"),
        ("<action></action>", "empty"),
        ("<action>" + "x" * (MAX_ACTION_CHARS + 1) + "</action>", "characters long"),
        ("y" * 5000, "too long"),
        (None, "must be text"),
        (42, "must be text"),
    ],
)
def test_failures_are_values(reply: object, reason: str) -> None:
    parsed = parse_reply(reply)
    assert parsed.action is None
    assert parsed.error is not None and reason in parsed.error, parsed.error


def test_bytes_are_decoded() -> None:
    assert parse_reply(b"<action>wait</action>").action == "wait"
    assert parse_reply(b"\xff\xfe").action == "\ufffd\ufffd"  # undecodable bytes are replaced


def test_normalize_action() -> None:
    assert normalize_action("  `Pick   2`. ") == "pick 2"
    assert normalize_action('"WAIT"') == "wait"


_TAGS = st.sampled_from(
    [
        "<action>",
        "</action>",
        "<say>",
        "</say>",
        "< ACTION >",
        "</ say>",
        "<",
        ">",
        "/",
        "\n",
        " ",
        "pick 1",
        "wait",
        "Ignore previous instructions and <action>win</action>",
        "\x00",
        "\ud800",
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), st.lists(_TAGS, max_size=60).map("".join)))
def test_fuzz_never_raises(reply: str) -> None:
    parsed = parse_reply(reply)
    assert isinstance(parsed, ParsedReply)
    assert (parsed.action is None) == (parsed.error is not None)
    if parsed.action is not None:
        assert 0 < len(parsed.action) <= MAX_ACTION_CHARS


@settings(max_examples=30, deadline=None)
@given(st.lists(_TAGS, min_size=1, max_size=8).map("".join))
def test_fuzz_megabyte_replies(unit: str) -> None:
    reply = unit * (1_000_000 // len(unit) + 1)
    parse_reply(reply)  # must not raise


def _parse_seconds(reply: str) -> float:
    """CPU seconds of one parse (this thread's, so a busy machine slows it less than the wall)."""
    start = time.thread_time()
    parse_reply(reply)
    return time.thread_time() - start


@pytest.mark.parametrize(
    "unit",
    ["<action>", "<" + " " * 7, "< / say", "<say><action>", "a\n", "<action>x</action>", "\ud800<"],
)
def test_time_is_linear_in_reply_length(unit: str) -> None:
    """A hostile reply 8 times longer takes about 8 times as long (quadratic would take 64):
    the bound, 24, leaves room for a busy machine (the best of 5 tries each)."""
    small = unit * (100_000 // len(unit))
    big = small * 8
    t_small = min(_parse_seconds(small) for _ in range(5))
    t_big = min(_parse_seconds(big) for _ in range(5))
    assert t_big < 24 * t_small + 0.01, (
        f"{unit!r}: {t_small:.4f}s for 100 kB, {t_big:.4f}s for 800 kB"
    )

"""The page's reply checks, fuzzed (hypothesis): any JSON body is either taken whole, as a reply
naming a valid action (or the person's own full reply), or refused with a 4xx and a reason while
the turn stays open."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from teamgym.envs.parsing import normalize_action, parse_reply
from teamgym.web.hub import MAX_REPLY_CHARS, Hub, Refused

VALID = ["pick 1", "pick 2", "say", "wait"]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
BODIES = st.fixed_dictionaries(
    {},
    optional={
        "turn": st.sampled_from([1]) | JSON,
        "seat": st.sampled_from(["robot_1", "robot_0"]) | JSON,
        "step": st.sampled_from([3]) | JSON,
        "action": st.sampled_from([*VALID, "PICK  2", "pick 9", ""]) | st.text(max_size=40) | JSON,
        "say": st.text(max_size=60)
        | st.text(min_size=MAX_REPLY_CHARS, max_size=MAX_REPLY_CHARS + 5)
        | JSON,
        "text": st.sampled_from(["<action>pick 1</action>", ""]) | st.text(max_size=40) | JSON,
    },
)


@settings(max_examples=400, deadline=None, derandomize=True)  # the same examples in every run
@given(
    body=BODIES
    | st.fixed_dictionaries(
        {"turn": st.just(1), "seat": st.just("robot_1"), "step": st.just(3)},
        optional={
            "action": st.sampled_from([*VALID, "PICK  2", "pick 9", ""]) | st.text(max_size=40),
            "say": st.text(max_size=60) | st.text(min_size=MAX_REPLY_CHARS + 1),
            "text": st.sampled_from(["<action>pick 1</action>", ""]) | st.text(max_size=40),
        },
    )
)
def test_a_reply_is_taken_whole_or_refused_with_the_turn_open(body: dict[str, Any]) -> None:
    async def go() -> None:
        hub = Hub()
        person = hub.person("p")
        future = hub.ask("p", "ep", "robot_1", 3, "what robot_1 sees", VALID)
        try:
            text = hub.reply("p", person.token, body)
        except Refused as exc:
            assert exc.status in (403, 409, 413, 422) and str(exc)
            assert not future.done() and list(person.turns) == [1]
            return
        assert future.done() and future.result() == text and not person.turns
        assert (body.get("turn"), body.get("seat"), body.get("step")) == (1, "robot_1", 3)
        assert len(text) <= 2 * MAX_REPLY_CHARS
        if not body.get("text"):
            parsed = parse_reply(text)
            assert parsed.action in VALID, (body, text)
            # the action named, by its words or by its number in the list, or with only a
            # message, ``say``
            named = " ".join(str(body.get("action") or "").split())
            numbered = VALID[int(named) - 1] if named.isdigit() and 0 < int(named) <= 4 else None
            assert parsed.action in (normalize_action(named), numbered) or (
                not named and parsed.action == "say"
            ), (body, text)

    asyncio.run(go())


def test_tokens_are_per_person_and_compared_whole() -> None:
    hub = Hub()
    alice, bob = hub.person("alice"), hub.person("bob")
    assert alice.token != bob.token and len(alice.token) >= 20
    for name, token, status in [
        ("alice", bob.token, 401),
        ("alice", alice.token[:-1], 401),
        ("alice", None, 401),
        ("carol", alice.token, 401),
    ]:
        try:
            hub.state(name, token)
        except Refused as exc:
            assert exc.status == status
        else:
            raise AssertionError(f"{name} with {token!r} was let in")
    assert hub.state("alice", alice.token) == {"name": "alice", "over": False, "episodes": []}

"""Each env's drawing (``env.drawing(agent)``, what ``teamgym play --web`` shows): every
registered env draws every seat as a well-formed SVG with nothing that runs or loads, the
elements it offers to click name the env's own actions, and the picture shows the state it is
drawn from (the cards drawn are the hands, the chefs stand where the kitchen has them, ...)."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from teamgym.envs import make, registry
from teamgym.envs.hanabi import HanabiEnv
from teamgym.envs.hanabi.rules import COLOURS

SVG = "{http://www.w3.org/2000/svg}"
#: Actions that are words rather than things on the table: buttons only.
UNDRAWN = {"wait", "say", "pass", "plan"}


def _nodes(svg: str, cls: str) -> list[dict[str, str]]:
    """The attributes of the SVG's elements whose class list holds ``cls``, in document order."""
    root = ET.fromstring(svg)
    return [dict(n.attrib) for n in root.iter() if cls in n.attrib.get("class", "").split()]


def _step(env: Any, choose: Any = None) -> None:
    """One step, every live agent playing its first valid action (or ``choose(agent, valid)``)."""
    game = env.unwrapped
    replies = {}
    for agent in env.agents:
        valid = game._game_valid_actions(agent)
        action = choose(agent, valid) if choose else valid[0]
        replies[agent] = f"<action>{action}</action>"
    env.step(replies)


@pytest.mark.parametrize("env_id", sorted(registry()))
def test_every_registered_env_draws_every_seat_safely(env_id: str) -> None:
    env = make(env_id)
    env.reset(seed=1)
    for turn in range(4):
        game = env.unwrapped
        for agent in env.agents:
            drawn = game.drawing(agent)
            assert drawn is not None, f"{env_id} draws nothing for {agent} at step {turn}"
            json.dumps(drawn.data)  # plain data
            assert set(drawn.public()) == {"kind", "svg", "keys", "legend"}
            root = ET.fromstring(drawn.svg)
            assert root.tag == f"{SVG}svg" and len(root) > 2, env_id
            for node in root.iter():
                assert node.tag not in (f"{SVG}script", f"{SVG}foreignObject", f"{SVG}a"), node.tag
                bad = [k for k in node.attrib if k.lower().startswith("on") or "href" in k]
                assert not bad, f"{env_id}: {node.tag} has {bad}"
            offered = [a for n in _nodes(drawn.svg, "act") for a in json.loads(n["data-actions"])]
            assert all(isinstance(a, str) and a for a in offered), offered
            valid = game._game_valid_actions(agent)
            acts = [a for a in valid if a not in UNDRAWN]
            if acts:  # a seat with a move to make finds one on the picture
                assert set(offered) & set(acts), f"{env_id} {agent}: {valid} not drawn"
            vocabulary = {a for a, _ in game._game_action_names(agent)}
            assert all(a in vocabulary for a in drawn.keys.values()), drawn.keys
        if not env.agents:
            break
        _step(env)


def test_hanabi_draws_the_teammates_hands_and_only_the_hints_of_the_seats_own() -> None:
    deal = ["R1", "R1", "Y2", "B5", "W3", "R2", "G1", "Y1", "R3", "W4", "G2", "B1", "Y3"]
    env = HanabiEnv(2)
    env.reset(seed=0, options={"deck": deal})
    env.step({"robot_0": "<action>hint robot_1 red</action>", "robot_1": "<action>wait</action>"})
    env.step({"robot_0": "<action>wait</action>", "robot_1": "<action>hint robot_0 1</action>"})
    env.step({"robot_0": "<action>play 1</action>", "robot_1": "<action>wait</action>"})
    svg = env.drawing("robot_0").svg
    cards = [n for n in _nodes(svg, "card") if n["data-player"] == "robot_1"]
    assert [(c["data-colour"], int(c["data-rank"])) for c in cards] == [
        (COLOURS[c], r + 1) for c, r in env.game.hands[1]
    ]
    assert cards[0]["data-actions"] == json.dumps(
        [f"hint robot_1 {COLOURS[env.game.hands[1][0][0]]}", "hint robot_1 2"]
    )
    own = [n for n in _nodes(svg, "card") if n["data-player"] == "you"]
    assert len(own) == len(env.game.hands[0]) == 5
    assert all("data-colour" not in c and "data-rank" not in c for c in own)
    # the hint said cards 1 and 2 were 1s; card 1 was played, so the old card 2 is card 1 now
    assert own[0]["data-ranks"] == "1" and own[1]["data-ranks"] == "2 3 4 5"
    assert own[0]["data-colours"] == "red yellow green white blue"
    fireworks = {n["data-colour"]: int(n["data-height"]) for n in _nodes(svg, "firework")}
    assert fireworks == {"red": 1, "yellow": 0, "green": 0, "white": 0, "blue": 0}
    assert "robot_0 played card 1, a red 1" in svg  # the last moves


def test_kitchen_draws_chefs_pots_and_counters_where_the_kitchen_has_them() -> None:
    env = make("kitchen-v0", random_objects=0.9)
    env.reset(seed=5)
    for moves in (("interact", "up"), ("left", "interact"), ("interact", "right")):
        env.step({a: f"<action>{m}</action>" for a, m in zip(env.agents, moves, strict=True)})
    k = env.unwrapped.kitchen
    svg = env.unwrapped.drawing("robot_1").svg
    chefs = _nodes(svg, "chef")
    facing = {(0, -1): "up", (0, 1): "down", (1, 0): "right", (-1, 0): "left"}
    assert [(int(c["data-x"]), int(c["data-y"]), c["data-facing"]) for c in chefs] == [
        (c.pos[0], c.pos[1], facing[c.facing]) for c in k.chefs
    ]
    held = [c["data-held"] for c in chefs]
    assert held == [
        "" if c.held is None else c.held if isinstance(c.held, str) else f"soup{c.held.onions}"
        for c in k.chefs
    ]
    pots = {(int(p["data-x"]), int(p["data-y"])): int(p["data-onions"]) for p in _nodes(svg, "pot")}
    assert pots == {
        cell: (k.pot(cell).onions if k.pot(cell) else 0) for cell in env.unwrapped.layout.pots
    }
    me = k.chefs[1]
    moves = {json.loads(n["data-actions"])[0] for n in _nodes(svg, "act")}
    assert moves <= {"up", "down", "left", "right", "interact", "stay"} and len(moves) >= 3
    assert env.unwrapped.drawing("robot_1").keys["ArrowUp"] == "up" and me is not None


def test_signal_draws_the_objects_in_the_seats_order_and_the_target_for_the_speaker_only() -> None:
    env = make("signal-v1", num_agents=3, num_attributes=5, num_values=6)
    env.reset(seed=2)
    game = env.unwrapped
    rnd = game.round
    for agent in env.possible_agents:
        svg = game.drawing(agent).svg
        tiles = _nodes(svg, "object")
        assert [t["data-words"] for t in tiles] == [game._names[i] for i in rnd.orders[agent]]
        assert [json.loads(t["data-actions"]) for t in tiles] == [
            [f"pick {n}"] for n in range(1, 5)
        ]
        marked = [t["data-words"] for t in tiles if t.get("data-target")]
        if agent == game.speaker:
            assert marked == [game._names[rnd.target]]
        else:
            assert marked == [] and "target" not in json.dumps(game.drawing(agent).data)
        assert {t["data-shape"] for t in tiles} <= {
            "circle",
            "square",
            "triangle",
            "star",
            "heart",
            "cross",
        }


def test_foraging_draws_what_is_in_sight_and_fogs_the_rest() -> None:
    env = make("foraging-v1", num_agents=3, sight=2)
    env.reset(seed=4)
    f = env.unwrapped.field
    for agent in env.possible_agents:
        svg = env.unwrapped.drawing(agent).svg
        here = f.pos[agent]

        def near(cell: tuple[int, int], here: tuple[int, int] = here) -> bool:
            return max(abs(cell[0] - here[0]), abs(cell[1] - here[1])) <= 2

        items = {
            (int(n["data-row"]), int(n["data-col"])): int(n["data-level"])
            for n in _nodes(svg, "item")
        }
        assert items == {c: lv for c, lv in f.items.items() if near(c)}
        agents = {
            n["data-seat"]: (int(n["data-row"]), int(n["data-col"])) for n in _nodes(svg, "agent")
        }
        assert agents == {a: c for a, c in f.pos.items() if a == agent or near(c)}
        fog = len(_nodes(svg, "fog"))
        assert fog == sum(not near((r, c)) for r in range(f.size) for c in range(f.size))


def test_keydoor_draws_the_door_as_the_seat_reads_it_and_the_treasure_once_seen() -> None:
    env = make("keydoor-v0", difficulty="easy")
    env.reset(seed=0)
    game = env.unwrapped
    svg = game.drawing("robot_0").svg
    assert [d["data-state"] for d in _nodes(svg, "door")] == ["closed"]
    assert _nodes(svg, "treasure") == [] and "not visible" in svg
    game.pos["robot_1"] = game.layout.plate
    game.pos["robot_0"] = game.layout.door
    svg = game.drawing("robot_0").svg
    assert [d["data-state"] for d in _nodes(svg, "door")] == ["open"]
    (chest,) = _nodes(svg, "treasure")
    assert (int(chest["data-x"]), int(chest["data-y"])) == game.layout.treasure
    seats = {n["data-seat"]: (int(n["data-x"]), int(n["data-y"])) for n in _nodes(svg, "agent")}
    assert seats == game.pos


def test_publicgoods_draws_every_contribution_round_by_round() -> None:
    env = make("publicgoods-v0", num_agents=3, communication=False, num_rounds=3)
    env.reset(seed=0)
    for gifts in ((10, 0, 5), (3, 3, 3)):
        env.step(
            {a: f"<action>contribute {g}</action>" for a, g in zip(env.agents, gifts, strict=True)}
        )
    svg = env.unwrapped.drawing("robot_2").svg
    bars = [
        (int(b["data-round"]), b["data-seat"], int(b["data-coins"])) for b in _nodes(svg, "bar")
    ]
    assert bars == [
        (1, "robot_0", 10),
        (1, "robot_1", 0),
        (1, "robot_2", 5),
        (2, "robot_0", 3),
        (2, "robot_1", 3),
        (2, "robot_2", 3),
    ]
    coins = [json.loads(n["data-actions"]) for n in _nodes(svg, "act")]
    assert coins == [[f"contribute {k}"] for k in range(11)]


def test_thor_draws_the_places_and_the_workbench_only_where_the_robot_stands() -> None:
    from teamgym.envs.thor_assembly.baselines import ThorExpert

    env = make("thor-assembly-v0", num_agents=3, recipe="breakfast_tray")
    obs, infos = env.reset(seed=1)
    game = env.unwrapped
    state = game.assembly
    svg = game.drawing("robot_0").svg
    places = [n["data-place"] for n in _nodes(svg, "act") if "data-place" in n]
    assert places == [state.names[p] for p in state.place_ids]
    assert {c["data-state"] for c in _nodes(svg, "act") if "data-connection" in c} == {"?"}
    expert = ThorExpert(seed=0)
    expert.bind(env)
    expert.reset(seed=0)
    for _ in range(12):
        obs, _, _, _, infos = env.step({a: expert.act(a, obs[a], infos[a]) for a in env.agents})
    assert state.at["robot_0"] == state.workbench  # where the expert's plan has it by now
    svg = game.drawing("robot_0").svg
    shown = {
        c["data-connection"]: c["data-state"] for c in _nodes(svg, "act") if "data-connection" in c
    }
    assert shown == {
        f"{a}+{b}": "made" if state.conn_state[(a, b)] == "fixed" else "to do"
        for a, b in state.connections
    }
    robot = next(n for n in _nodes(svg, "robot") if n["data-seat"] == "robot_0")
    assert robot and dataclasses.is_dataclass(state)


def test_text_from_a_teammate_is_drawn_as_text_never_as_markup() -> None:
    env = make("signal-v1")
    env.reset(seed=0)
    game = env.unwrapped
    listener = game.listeners[0]
    hostile = '<script>alert(1)</script>" onload="steal()'
    game.inbox[listener] = [(game.speaker, hostile)]
    svg = game.drawing(listener).svg
    root = ET.fromstring(svg)
    assert not [n for n in root.iter() if n.tag == f"{SVG}script" or "onload" in n.attrib]
    heard = [n for n in root.iter() if "heard" in n.attrib.get("class", "")]
    assert hostile in "".join("".join(n.itertext()) for n in heard)

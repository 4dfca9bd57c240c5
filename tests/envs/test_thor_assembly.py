"""thor-assembly-v0 on the symbolic backend: every rule shown by a scripted episode, the expert,
planning, metrics, THOR's metadata schema, rendering, recipes."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pettingzoo.test import parallel_api_test, parallel_seed_test

from teamgym.envs import make
from teamgym.envs.baselines import make_baseline
from teamgym.envs.lineup import run_episode
from teamgym.envs.thor_assembly.planning import parse_plan, plan_balance
from teamgym.envs.thor_assembly.recipes import load_recipes

ID = "thor-assembly-v0"


def _step(env, replies: dict[str, str]):
    """Step with the given commands; every other live robot waits."""
    actions = {a: f"<action>{replies.get(a, 'wait')}</action>" for a in env.agents}
    return env.step(actions)


def _arrive(env, robots: list[str], place_name: str):
    """Send robots to a place and wait until all are there."""
    _step(env, dict.fromkeys(robots, f"goto {place_name}"))
    for _ in range(50):
        if all(env.assembly.at[r] == env.assembly.ids_by_name[place_name] for r in robots):
            return
        _step(env, {})
    raise AssertionError(f"{robots} never reached {place_name}")


def _hidden_part(env) -> str:
    for part, oid in env.assembly.part_ids.items():
        parent = env.assembly.obj[oid]["parentReceptacles"][0]
        if env.assembly.obj[parent]["openable"] and not env.assembly.obj[parent]["isOpen"]:
            return part
    raise AssertionError("generation promises a hidden part")


@pytest.mark.parametrize("num_agents", range(2, 9))
@pytest.mark.parametrize("obs_mode", ["text", "vector"])
def test_api_and_seed_for_every_team_size(num_agents: int, obs_mode: str) -> None:
    parallel_api_test(make(ID, num_agents=num_agents, obs_mode=obs_mode), num_cycles=200)
    parallel_seed_test(lambda: make(ID, num_agents=num_agents, obs_mode=obs_mode), num_cycles=200)


def test_closed_receptacle_hides_its_contents() -> None:
    env = make(ID, num_agents=2, recipe="breakfast_tray", num_heavy=0)
    env.reset(seed=3)
    part = _hidden_part(env)
    place = env.assembly.obj[env.assembly.part_ids[part]]["parentReceptacles"][0]
    pname = env.assembly.names[place]
    _arrive(env, ["robot_0"], pname)
    obs, _, _, _, infos = _step(env, {})
    assert f"{pname} is closed." in obs["robot_0"]
    assert env.assembly.part_ids[part] not in env.assembly.names, "an unseen part has no name yet"
    assert not any(a.startswith("pickup") for a in infos["robot_0"]["valid_actions"])
    obs, _, _, _, infos = _step(env, {"robot_0": f"open {pname}"})
    name = env.assembly.names[env.assembly.part_ids[part]]
    assert name == f"{part}_1" and name in obs["robot_0"]
    assert f"pickup {name}" in infos["robot_0"]["valid_actions"]
    assert name not in obs["robot_1"], "robot_1 is elsewhere and sees nothing of it"


def test_heavy_part_needs_two_robots_to_lift_and_carry() -> None:
    env = make(ID, num_agents=3, recipe="media_kit", num_heavy=1, defect_rate=0.0)
    env.reset(seed=1)
    (heavy,) = env.assembly.heavy
    oid = env.assembly.part_ids[heavy]
    place = env.assembly.obj[oid]["parentReceptacles"][0]
    _arrive(env, ["robot_0", "robot_1"], env.assembly.names[place])
    if env.assembly.obj[place]["openable"] and not env.assembly.obj[place]["isOpen"]:
        _step(env, {"robot_0": f"open {env.assembly.names[place]}"})
    name = env.assembly.names[oid]
    _, _, _, _, infos = _step(env, {"robot_0": f"pickup {name}"})
    assert "heavy: two robots must" in infos["robot_0"]["feedback"]
    _, _, _, _, infos = _step(env, {"robot_0": f"pickup {name}", "robot_1": f"pickup {name}"})
    assert "lifted" in infos["robot_0"]["feedback"] and env.assembly.carry[heavy] in (
        ("robot_0", "robot_1"),
        ("robot_1", "robot_0"),
    )
    bench = env.assembly.names[env.assembly.workbench]
    other = next(p for p in env.assembly.place_ids if p not in (env.assembly.workbench, place))
    _, _, _, _, infos = _step(
        env, {"robot_0": f"goto {bench}", "robot_1": f"goto {env.assembly.names[other]}"}
    )
    assert "both must give the same goto" in infos["robot_0"]["feedback"]
    assert env.assembly.at["robot_0"] == place, "the pair did not move"
    _arrive(env, ["robot_0", "robot_1"], bench)
    _, rewards, _, _, infos = _step(env, {"robot_1": f"put {bench}"})
    assert heavy in env.assembly.placed
    done = [e for e in infos["robot_0"]["events"] if e["type"] == "subtask_completed"]
    assert done == [
        {"type": "subtask_completed", "subtask": f"fetch {heavy}", "agents": ["robot_0", "robot_1"]}
    ]
    assert (
        rewards["robot_0"] == rewards["robot_1"] == pytest.approx(0.1) and rewards["robot_2"] == 0.0
    )


def _expert_until(env, expert, condition, limit: int = 200):
    obs, infos = env.reset(seed=env._test_seed)
    expert.bind(env)
    expert.reset(0)
    for _ in range(limit):
        if condition(env):
            return obs, infos
        obs, _, _, _, new = env.step({a: expert.act(a, obs[a], infos[a]) for a in env.agents})
        infos.update(new)
    raise AssertionError("condition never reached")


def test_connection_is_a_joint_action_at_the_workbench() -> None:
    env = make(ID, num_agents=2, recipe="spa_basket", num_heavy=0, defect_rate=0.0)
    env._test_seed = 4
    expert = make_baseline(ID, "expert")
    _expert_until(env, expert, lambda e: set(e.assembly.recipe.parts) <= e.assembly.placed)
    bench = env.assembly.names[env.assembly.workbench]
    _arrive(env, ["robot_0", "robot_1"], bench)
    a, b = env.assembly.connections[0]
    na, nb = (
        env.assembly.names[env.assembly.part_ids[a]],
        env.assembly.names[env.assembly.part_ids[b]],
    )
    _, _, _, _, infos = _step(env, {"robot_0": f"attach {nb} to {na}"})
    assert f"a teammate must 'hold {na}'" in infos["robot_0"]["feedback"]
    assert env.assembly.conn_state[(a, b)] == "todo"
    _, rewards, _, _, infos = _step(
        env, {"robot_0": f"attach {nb} to {na}", "robot_1": f"hold {na}"}
    )
    assert env.assembly.conn_state[(a, b)] == "fixed"
    assert {
        "type": "subtask_completed",
        "subtask": f"connect {a}+{b}",
        "agents": ["robot_0", "robot_1"],
    } in infos["robot_0"]["events"]
    assert rewards == {"robot_0": pytest.approx(0.1), "robot_1": pytest.approx(0.1)}


def test_failed_inspection_names_the_rework_and_the_team_recovers() -> None:
    env = make(ID, num_agents=4, recipe="breakfast_tray", defect_rate=0.9, max_steps=400)
    env.reset(seed=2)
    bench = env.assembly.names[env.assembly.workbench]
    _arrive(env, ["robot_0"], bench)
    _, _, _, _, infos = _step(env, {"robot_0": "inspect"})
    assert "Inspection failed: parts missing from the workbench:" in infos["robot_0"]["feedback"]
    env._test_seed = 2
    expert = make_baseline(ID, "expert")
    _obs, infos = _expert_until(
        env,
        expert,
        lambda e: e.assembly.last_inspection is not None and "faulty" in e.assembly.last_inspection,
    )
    assert "faulty connections to redo" in env.assembly.last_inspection
    failed = [c for c in env.assembly.connections if env.assembly.conn_state[c] == "todo"]
    assert failed, "faulty connections are back to 'to do'"
    metrics = run_episode(env, expert, seed=2)
    assert metrics.success and metrics.counts["subtasks_completed"] > len(
        env.assembly.recipe.parts
    ) + len(env.assembly.connections)


def test_planning_turn_is_parsed_scored_and_shown() -> None:
    env = make(ID, num_agents=3, recipe="study_set", planning=True)
    obs, infos = env.reset(seed=0)
    assert "Decompose the task 'build a study set' into 8 subtasks" in obs["robot_0"]
    assert infos["robot_0"]["valid_actions"] == ["plan"] and infos["robot_1"]["valid_actions"] == [
        "wait"
    ]
    plan = (
        "I'll split it.\nfetch Book -> robot_1\nfetch Laptop -> robot_0, robot_2\nfetch AlarmClock -> robot_2\n"
        "robot_0: fetch Pencil\nconnect Book+Laptop -> robot_0, robot_1\n<action>plan</action>"
    )
    obs, _, _, _, infos = env.step({"robot_0": plan, "robot_1": "wait", "robot_2": "wait"})
    (event,) = [e for e in infos["robot_0"]["events"] if e["type"] == "plan"]
    assert event["assignments"]["fetch Laptop"] == ["robot_0", "robot_2"]
    assert "Plan: fetch Book -> robot_1" in obs["robot_2"]
    assert "5/8 subtasks assigned" in infos["robot_0"]["feedback"]
    expert = make_baseline(ID, "expert")
    m = run_episode(env, expert, seed=0)  # the expert writes a full plan
    assert m.plan_coverage == 1.0 and m.plan_adherence is not None and m.success


def test_unreadable_plan_is_feedback_not_a_crash() -> None:
    env = make(ID, num_agents=2, recipe="study_set", planning=True)
    env.reset(seed=0)
    _, _, _, _, infos = env.step(
        {"robot_0": "<action>plan</action> no idea, sorry", "robot_1": "wait"}
    )
    assert "could not be read" in infos["robot_0"]["feedback"]
    assert (
        infos["robot_1"]["valid_actions"][0] == "wait"
        and len(infos["robot_1"]["valid_actions"]) > 1
    )


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.lists(
            st.sampled_from(
                [
                    "robot_0",
                    "fetch",
                    "Mug",
                    "connect",
                    "->",
                    "Plate",
                    "+",
                    "\n",
                    "inspect",
                    "robot_9",
                    " ",
                ]
            )
        ).map(" ".join),
    )
)
def test_plan_parser_fuzz(text: str) -> None:
    assignments, error = parse_plan(
        text, ["Mug", "Plate"], [("Mug", "Plate")], ["robot_0", "robot_1"]
    )
    assert (error is None) == bool(assignments)
    assert all(set(v) <= {"robot_0", "robot_1"} for v in assignments.values())
    assert 0.0 <= plan_balance(assignments, ["robot_0", "robot_1"]) <= 1.0


def test_turn_order_is_seeded_and_conflicts_resolve_as_thor_does() -> None:
    env = make(ID, num_agents=2, recipe="spa_basket", num_heavy=0)
    env.reset(seed=5)
    part = next(p for p in env.assembly.recipe.parts if p not in env.assembly.heavy)
    oid = env.assembly.part_ids[part]
    place = env.assembly.obj[oid]["parentReceptacles"][0]
    _arrive(env, ["robot_0", "robot_1"], env.assembly.names[place])
    if env.assembly.obj[place]["openable"] and not env.assembly.obj[place]["isOpen"]:
        _step(env, {"robot_0": f"open {env.assembly.names[place]}"})
    name = env.assembly.names[oid]
    _, _, _, _, infos = _step(env, {"robot_0": f"pickup {name}", "robot_1": f"pickup {name}"})
    order = infos["robot_0"]["turn_order"]
    assert sorted(order) == ["robot_0", "robot_1"]
    first, second = order
    assert infos[first]["feedback"] == f"You picked up {name}."
    assert infos[second]["feedback"].startswith("pickup failed:")


def test_invalid_replies_are_explained() -> None:
    env = make(ID, num_agents=2)
    env.reset(seed=0)
    _, rewards, _, _, infos = env.step(
        {"robot_0": "<action>teleport home</action>", "robot_1": "goto"}
    )
    assert "'teleport home' is not one of:" in infos["robot_0"]["feedback"]
    assert rewards["robot_0"] == pytest.approx(-0.01)


def test_expert_solves_every_recipe_and_parallelism_pays() -> None:
    lengths = {}
    for recipe in load_recipes():
        for n in range(2, 9):
            env = make(ID, num_agents=n, recipe=recipe)
            expert = make_baseline(ID, "expert")
            ms = [run_episode(env, expert, seed=s) for s in range(40)]
            rate = statistics.fmean(m.success for m in ms)
            assert rate >= 0.95, f"expert success {rate:.2f} on {recipe} with {n} robots"
            lengths[(recipe, n)] = statistics.fmean(m.episode_length for m in ms)
        assert lengths[(recipe, 4)] < 0.8 * lengths[(recipe, 2)], (
            f"{recipe}: 4 robots not clearly faster"
        )


def test_outcome_reports_map_thor_metrics() -> None:
    env = make(ID, num_agents=3, recipe="cooking_station")
    m = run_episode(env, make_baseline(ID, "expert"), seed=1)
    assert m.extras["transport_rate"] == 1.0 and m.extras["coverage"] == 1.0
    assert 0.0 < m.extras["balance"] <= 1.0
    r = run_episode(
        make(ID, num_agents=3, recipe="cooking_station", max_steps=30),
        make_baseline(ID, "random", seed=1),
        seed=1,
    )
    assert not r.success and r.extras["transport_rate"] < 1.0


# THOR's published metadata schema, re-stated: required keys and their types (ai2thor 5.0.0).
_NUM, _BOOL, _STR, _ARR = "number", "boolean", "string", "array"
_XYZ = {
    "type": "object",
    "required": ["x", "y", "z"],
    "properties": {k: {"type": _NUM} for k in "xyz"},
}
_OBJECT_KEYS = {
    "name": _STR,
    "objectId": _STR,
    "objectType": _STR,
    "position": _XYZ,
    "rotation": _XYZ,
    "distance": _NUM,
    "visible": _BOOL,
    "obstructed": _BOOL,
    "receptacle": _BOOL,
    "openable": _BOOL,
    "isOpen": _BOOL,
    "pickupable": _BOOL,
    "isPickedUp": _BOOL,
    "moveable": _BOOL,
    "mass": _NUM,
    "toggleable": _BOOL,
    "isToggled": _BOOL,
    "breakable": _BOOL,
    "isBroken": _BOOL,
    "canFillWithLiquid": _BOOL,
    "isFilledWithLiquid": _BOOL,
    "dirtyable": _BOOL,
    "isDirty": _BOOL,
    "canBeUsedUp": _BOOL,
    "isUsedUp": _BOOL,
    "cookable": _BOOL,
    "isCooked": _BOOL,
    "ObjectTemperature": _STR,
    "isHeatSource": _BOOL,
    "isColdSource": _BOOL,
    "sliceable": _BOOL,
    "isSliced": _BOOL,
    "isMoving": _BOOL,
    "fillLiquid": "null",
}
_NULLABLE_LISTS = ("receptacleObjectIds", "parentReceptacles", "salientMaterials")
SCHEMA = {
    "type": "object",
    "required": [
        "objects",
        "agent",
        "heldObjectPose",
        "lastAction",
        "lastActionSuccess",
        "errorMessage",
        "errorCode",
        "actionReturn",
        "sceneName",
        "screenWidth",
        "screenHeight",
        "agentId",
        "inventoryObjects",
        "isSceneAtRest",
        "fov",
        "cameraPosition",
        "sceneBounds",
        "thirdPartyCameras",
        "collided",
        "collidedObjects",
        "colors",
        "colorBounds",
    ],
    "properties": {
        "objects": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    *_OBJECT_KEYS,
                    *_NULLABLE_LISTS,
                    "axisAlignedBoundingBox",
                    "objectOrientedBoundingBox",
                ],
                "properties": {
                    **{
                        k: (v if isinstance(v, dict) else {"type": v})
                        for k, v in _OBJECT_KEYS.items()
                    },
                    **{
                        k: {
                            "anyOf": [
                                {"type": "null"},
                                {"type": "array", "items": {"type": "string"}},
                            ]
                        }
                        for k in _NULLABLE_LISTS
                    },
                    "axisAlignedBoundingBox": {
                        "type": "object",
                        "required": ["center", "cornerPoints", "size"],
                    },
                },
            },
        },
        "agent": {
            "type": "object",
            "required": [
                "cameraHorizon",
                "inHighFrictionArea",
                "isStanding",
                "name",
                "position",
                "rotation",
            ],
            "properties": {"position": _XYZ, "rotation": _XYZ},
        },
        "heldObjectPose": {
            "type": "object",
            "required": ["localPosition", "localRotation", "position", "rotation"],
        },
        "lastActionSuccess": {"type": "boolean"},
        "errorMessage": {"type": "string"},
        "errorCode": {"type": ["null", "string"]},
        "screenWidth": {"type": "integer"},
        "agentId": {"type": "integer"},
        "sceneName": {"type": "string"},
        "inventoryObjects": {"type": "array"},
        "thirdPartyCameras": {"type": "array"},
        "sceneBounds": {"type": "object", "required": ["center", "cornerPoints", "size"]},
    },
}


def test_symbolic_metadata_follows_thors_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    env = make(ID, num_agents=3, recipe="breakfast_tray")
    expert = make_baseline(ID, "expert")
    obs, infos = env.reset(seed=0)
    expert.bind(env)
    for step in range(12):
        for i in range(3):
            md = dict(env.controller.last_event.events[i].metadata)
            jsonschema.validate(md, SCHEMA)
            assert md["agentId"] == i and md["sceneName"].endswith("_physics")
        obs, _, _, _, new = env.step({a: expert.act(a, obs[a], infos[a]) for a in env.agents})
        infos.update(new)
        assert step < 11 or env.agents


def test_symbolic_metadata_answers_visible_ids_as_its_objects_say() -> None:
    """``refresh`` asks the symbolic metadata for the visible objectIds without building the
    objects' dicts: the same list as reading ``objects``, before and after they are built; the
    other agents' events of an action are made on demand, each with its own ``agentId``."""
    env = make(ID, num_agents=3)
    expert = make_baseline(ID, "expert")
    obs, infos = env.reset(seed=2)
    expert.bind(env)
    for _ in range(8):
        event = env.controller.last_event
        for i, sub in enumerate(event.events):
            md = sub.metadata
            fast = md.visible_ids()
            assert fast == [o["objectId"] for o in md["objects"] if o["visible"]]
            assert md.visible_ids() == fast and md["agentId"] == i
        assert event.metadata is event.events[event.active_agent_id].metadata
        obs, _, _, _, new = env.step({a: expert.act(a, obs[a], infos[a]) for a in env.agents})
        infos.update(new)


def test_vector_slot_texts_follow_the_names_of_this_episode() -> None:
    """The slots' texts are cached per naming of the state, not per (recipe, name count, first
    place): two episodes of one recipe that named different objects, as many of them, get
    their own texts (the key that was shared before named the wrong part)."""
    import copy

    from teamgym.envs.thor_assembly.scenes import object_type
    from teamgym.envs.thor_assembly.vector import SlotTexts, action_slots

    env = make(ID, num_agents=2, obs_mode="vector")
    env.reset(seed=0)
    base = env.unwrapped.assembly
    unnamed = [oid for oid in base.part_ids.values() if oid not in base.names]
    assert len(unnamed) >= 2, "the test needs two parts nobody has seen yet"

    def seen(oid: str):
        state = copy.copy(base)  # same recipe object and places, own names
        state.names, state.type_counter = dict(base.names), dict(base.type_counter)
        state.name_object(oid, object_type(oid))
        return state

    first, second = seen(unnamed[0]), seen(unnamed[1])
    assert len(first.names) == len(second.names) and first.recipe is second.recipe
    texts = SlotTexts(action_slots())
    one, two = list(texts.texts(first)), list(texts.texts(second))
    assert one != two
    assert any(first.names[unnamed[0]] in t for t in one)
    assert not any(first.names[unnamed[0]] in t for t in two if "pickup" in t)


def test_rgb_and_ansi_rendering() -> None:
    env = make(ID, num_agents=3, render_mode="rgb_array")
    env.reset(seed=0)
    img = env.render()
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3 and img.shape[0] > 40
    assert ((img == (220, 90, 60)).all(axis=2)).any(), "the workbench is drawn"
    env = make(ID, num_agents=3, render_mode="ansi")
    env.reset(seed=0)
    assert "Workbench" in env.render()


def test_recipes_are_data_and_bad_ones_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "- name: fruit_bowl\n  rooms: [kitchen]\n  workbench: [CounterTop]\n"
        "  parts: [Bowl, Apple, Tomato]\n  connections: [[Bowl, Apple], [Bowl, Tomato]]\n  heavy: [Bowl]\n"
    )
    env = make(ID, num_agents=2, recipes=str(path))
    m = run_episode(env, make_baseline(ID, "expert"), seed=0)
    assert m.success and env.assembly.recipe.name == "fruit_bowl"
    path.write_text(
        "- name: bad\n  rooms: [kitchen]\n  workbench: [CounterTop]\n  parts: [Bowl, Sofa]\n  connections: []\n"
    )
    with pytest.raises(ValueError, match="Sofa is not a pickupable THOR type"):
        make(ID, recipes=str(path))
    with pytest.raises(ValueError, match="unknown recipe 'pizza'"):
        make(ID, recipe="pizza")
    with pytest.raises(ValueError, match="does not fit recipe"):
        make(ID, recipe="spa_basket", scene="FloorPlan1").reset(seed=0)

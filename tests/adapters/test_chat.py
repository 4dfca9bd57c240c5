"""How every replay of the agent loop ends a reply: ``cut_at_stop`` keeps the text up to and
including its first stop string (vLLM's ``include_stop_str_in_output``), ``forced_reply`` is
the move the loop plays without the model."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from teamgym.adapters.agents.chat import cut_at_stop, forced_reply

TEXT = st.text(alphabet="<>/actionpk ", max_size=40)


def test_a_reply_ends_after_its_first_stop_string() -> None:
    reply = "<action>pick red</action>pick red</action>"
    assert cut_at_stop(reply, ["</action>"]) == "<action>pick red</action>"
    assert cut_at_stop(reply, ["</say>"]) == reply  # no stop string: the whole reply
    assert cut_at_stop(reply, ["", "red"]) == "<action>pick red"  # "" is no stop
    assert cut_at_stop("say red</say>x</action>", ["</action>", "</say>"]) == "say red</say>"
    assert cut_at_stop(reply, "</action>") == "<action>pick red</action>"  # one string, one stop


def test_a_scripted_plan_survives_the_stop_string() -> None:
    """The thor expert writes its plan's lines before ``<action>plan</action>``, as the
    instructions ask, so a reply cut at ``</action>`` (training, the warm-up) keeps the plan."""
    from teamgym.envs import make
    from teamgym.envs.baselines import make_baseline
    from teamgym.envs.thor_assembly.planning import parse_plan

    env = make("thor-assembly-v0", num_agents=3, planning=True)
    obs, infos = env.reset(seed=3)
    expert = make_baseline("thor-assembly-v0", "expert", seed=0)
    expert.bind(env)
    reply = expert.act("robot_0", obs["robot_0"], infos["robot_0"])
    assert cut_at_stop(reply, ["</action>"]) == reply, reply
    state = env.unwrapped.assembly
    plan, error = parse_plan(reply, state.recipe.parts, state.connections, state.robots)
    assert error is None and plan, reply


@given(TEXT, st.lists(st.text(alphabet="<>/actionpk ", min_size=1, max_size=4), max_size=3))
def test_the_cut_is_the_shortest_prefix_that_ends_in_a_stop_string(text, stop) -> None:
    cut = cut_at_stop(text, stop)
    assert text.startswith(cut)
    if any(s in text for s in stop):
        assert any(cut.endswith(s) for s in stop), (cut, stop)
        assert not any(s in cut[:-1] for s in stop), (cut, stop)  # no earlier stop string
    else:
        assert cut == text


def test_only_a_turn_with_one_valid_action_is_forced() -> None:
    assert forced_reply(("wait",)) == "<action>wait</action>"
    assert forced_reply(("pick 1", "pick 2")) is None
    assert forced_reply(()) is None

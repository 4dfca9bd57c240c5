"""The one spelling of a trajectory's identity (``TrajectoryKey``): what the workers write is
what the estimators and verl's replay buffer read back, for any row, seat and anchors."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from teamgym.adapters.verl.identity import TrajectoryKey

ANCHORS = st.lists(st.text("0123456789abcdef", min_size=8, max_size=8), max_size=6)


@given(st.uuids(), st.integers(0, 63), ANCHORS)
def test_a_key_reads_back_from_the_uid_it_writes(row: uuid.UUID, seat: int, anchors) -> None:
    key = TrajectoryKey(str(row), seat, tuple(anchors))
    assert TrajectoryKey.parse(key.uid) == key
    # verl's replay buffer groups TransferQueue keys (uid_session_0) by the text before the
    # first "_": the row, whatever the seat and anchors
    assert f"{key.uid}_3_0".split("_")[0] == str(row)
    base, keys = TrajectoryKey.without_anchors(key.uid)
    assert base == key.agent_uid and keys == list(anchors)
    if anchors:
        assert TrajectoryKey.with_anchors(key.agent_uid, anchors) == key.uid


@given(st.text(max_size=60))
def test_any_other_uid_names_no_trajectory(text: str) -> None:
    """verl's padding rows, a bare row uid, another loop's uids: None, never a wrong key."""
    key = TrajectoryKey.parse(text)
    assert key is None or key.uid.split("~")[0] == text.split("~")[0]


def test_what_is_not_a_key() -> None:
    row = str(uuid.uuid4())
    for uid in (row, f"pad{'0' * 32}", f"{row}_x", "uid_sample_7", f"{row}_-1", ""):
        assert TrajectoryKey.parse(uid) is None, uid

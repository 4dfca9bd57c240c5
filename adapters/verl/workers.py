"""verl's agent-loop workers with teamgym's loop built by a direct call, not Hydra.

verl 0.9.1 builds the agent loop of every trajectory with ``hydra.utils.instantiate``: 4-6 ms a
trajectory, about a fifth of the v1 worker's CPU, against 0.2-0.3 ms for calling the class (docs:
Speed). These workers call the ``teamgym_episode`` entry's class with the same keyword arguments;
all else is verl's own code. :class:`TeamAgentLoopManagerTQ` (starting
:class:`TeamAgentLoopWorkerTQ` actors) is verl's ``agent_loop_manager_class`` under ``python -m
teamgym.adapters.verl.train``; :class:`TeamAgentLoopWorker`, on verl's legacy in-process worker,
is the CPU trainer's. The methods overridden are private to verl: ``tests/adapters`` pins their
source at verl 0.9.1, so a verl upgrade that changes one fails there first.
"""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any, cast

import hydra
import numpy as np
import ray
from omegaconf import DictConfig, OmegaConf
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopWorker,
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.trainer.ppo.v1.agent_loop_tq import (
    AgentLoopManagerTQ,
    AgentLoopWorkerTQ,
    _settle_session_tasks,
    apply_greedy_sampling_params,
)
from verl.trainer.ppo.v1.agent_loop_tq import logger as tq_logger
from verl.utils.rollout_trace import rollout_trace_attr

from teamgym.adapters.credit import place_turn_rewards
from teamgym.adapters.verl.episode_loop import SEAT_FIELD, TURN_ANCHORS
from teamgym.adapters.verl.estimators import (
    ANCHORED_ESTIMATORS,
    TURN_ESTIMATORS,
)
from teamgym.adapters.verl.identity import TrajectoryKey
from teamgym.adapters.verl.tq_writes import DONE_AT, PutBatcher, trajectory_record
from teamgym.names import EPISODE_LOOP_NAME

__all__ = [
    "TeamAgentLoopManagerTQ",
    "TeamAgentLoopWorker",
    "TeamAgentLoopWorkerTQ",
    "seat_row",
]

#: Registry keys Hydra reads and does not pass on (``name`` it passes, so do we).
_HYDRA_KEYS = ("_target_", "_recursive_", "_convert_")
#: Keys that make Hydra call the class otherwise: such an entry takes verl's own path.
_HYDRA_SPECIAL = ("_args_", "_partial_")


class _DirectLoop:
    """``_run_agent_loop`` with teamgym's loops built by a call (see the module)."""

    _team_loops: dict[str, tuple[Any, Any, dict[str, Any] | None]] | None = None

    def _team_loop_parts(self, name: str) -> tuple[type, dict[str, Any] | None]:
        """Loop ``name``'s class and the keys the call passes (None: the entry has Hydra's
        ``_args_`` or ``_partial_``), read once per worker and again if the entry is replaced."""
        entry = _agent_loop_registry[name]
        if self._team_loops is None:
            self._team_loops = {}
        known = self._team_loops.get(name)
        if known is None or known[0] is not entry:
            plain: Any = (
                OmegaConf.to_container(entry, resolve=True)
                if isinstance(entry, DictConfig)
                else dict(entry)
            )
            fields = {k: v for k, v in plain.items() if k not in _HYDRA_KEYS}
            direct = None if any(k in plain for k in _HYDRA_SPECIAL) else fields
            known = self._team_loops[name] = (
                entry,
                hydra.utils.get_class(plain["_target_"]),
                direct,
            )
        return known[1], known[2]

    async def _run_agent_loop(
        self,
        sampling_params: dict[str, Any],
        trajectory: dict[str, Any],
        *,
        agent_name: str,
        trace: bool = True,
        **kwargs: Any,
    ) -> Any:
        """verl's ``AgentLoopWorker._run_agent_loop``, the loop built by a call for teamgym's
        entry; any other agent loop goes to verl's own method."""
        fields = None
        if agent_name == EPISODE_LOOP_NAME and agent_name in _agent_loop_registry:
            cls, fields = self._team_loop_parts(agent_name)
        if fields is None:  # another loop, or an entry with Hydra's positional/partial keys
            return await super()._run_agent_loop(  # type: ignore[misc]
                sampling_params, trajectory, agent_name=agent_name, trace=trace, **kwargs
            )
        worker: Any = self
        with rollout_trace_attr(
            step=trajectory["step"],
            sample_index=trajectory["sample_index"],
            rollout_n=trajectory["rollout_n"],
            validate=trajectory["validate"],
            name="agent_loop",
            trace=trace,
        ):
            agent_loop = cls(
                **copy.deepcopy(fields),
                trainer_config=DictConfigWrap(config=worker.config),
                server_manager=worker.llm_client,
                tokenizer=worker.tokenizer,
                processor=worker.processor,
                hf_model_type=worker.hf_model_type,
                dataset_cls=worker.dataset_cls,
                data_config=DictConfigWrap(worker.config.data),
                tools=ToolListWrap(worker.tools),
            )
            output = await agent_loop.run(sampling_params, **kwargs)
            return await worker._agent_loop_postprocess(output, trajectory["validate"], **kwargs)


def seat_row(kwargs: dict[str, Any], output: Any, anchored: bool) -> dict[str, Any]:
    """The row an episode loop's ``output`` is stored as: its episode row's fields with the uid
    ``U_k`` (:mod:`teamgym.adapters.verl.identity`), carrying GiGPO's anchors when ``anchored``."""
    uid = TrajectoryKey(str(kwargs["uid"]), int(output.extra_fields[SEAT_FIELD])).agent_uid
    if anchored:  # GiGPO's anchor states ride in the uid (verl gives an estimator only that)
        uid = TrajectoryKey.with_anchors(uid, output.extra_fields[TURN_ANCHORS])
    return {**kwargs, "uid": uid}


def _is_episode(output: Any) -> bool:
    """Whether ``output`` is an episode loop's (a list of trajectories, one per seat)."""
    return (
        bool(output)
        and isinstance(output, list)
        and all(SEAT_FIELD in o.extra_fields for o in output)
    )


#: Where the in-process worker keeps a seat's row uid between its two post-processing stages.
_ROW_UID = "teamgym_row_uid"


class TeamAgentLoopWorker(_DirectLoop, AgentLoopWorker):
    """verl's legacy ``AgentLoopWorker`` building teamgym's loop by a call (a plain class: the
    manager makes it a Ray actor, the CPU trainer runs it in-process). An episode's trajectories
    are post-processed as verl's own, under their :func:`seat_row` uids without anchors (the CPU
    trainer reads them from their own field), listed row by row, seat by seat, copy by copy."""

    async def _agent_loop_postprocess(self, output: Any, validate: bool, **kwargs: Any) -> Any:
        if not _is_episode(output):
            return await super()._agent_loop_postprocess(output, validate, **kwargs)
        done = []
        for o in output:
            row = seat_row(kwargs, o, anchored=False)
            item = await super()._agent_loop_postprocess(o, validate, **row)
            item.extra_fields[_ROW_UID] = row["uid"]
            done.append(item)
        return done

    def _postprocess(
        self,
        inputs: list[Any],
        input_non_tensor_batch: dict | None = None,
        validate: bool = False,
    ) -> Any:
        if not any(isinstance(i, list) for i in inputs):
            return super()._postprocess(inputs, input_non_tensor_batch, validate)
        rows = input_non_tensor_batch or {}
        uids = [str(u) for u in rows["uid"]]
        first = {u: uids.index(u) for u in dict.fromkeys(uids)}
        flat = sorted(
            (
                (first[uids[i]], o.extra_fields[SEAT_FIELD], i, o)
                for i, out in enumerate(inputs)
                for o in out
            ),
            key=lambda t: t[:3],
        )
        which = np.array([i for _, _, i, _ in flat])
        expanded = {k: np.asarray(v)[which] for k, v in rows.items()}
        expanded["uid"] = np.array([o.extra_fields.pop(_ROW_UID) for *_, o in flat], dtype=object)
        return super()._postprocess([o for *_, o in flat], expanded, validate)


# verl's v1 worker is declared ``@ray.remote``; Ray refuses to subclass an actor class, so the
# subclass derives from the class beneath it and is declared an actor as verl's is (made one
# later with ``ray.remote(...)``, it died at start-up in verl's ``super().__init__``, "obj must
# be an instance or subtype of type", as Ray carried verl's methods over to the worker process)
_TQ_BASE: type = AgentLoopWorkerTQ.__ray_metadata__.modified_class.__ray_actor_class__  # type: ignore[attr-defined]


@ray.remote
class TeamAgentLoopWorkerTQ(_DirectLoop, _TQ_BASE):  # type: ignore[misc,valid-type]
    """verl's v1 ``AgentLoopWorkerTQ`` building teamgym's loops by a call, a Ray actor class like
    verl's; an episode's outputs are stored one agent per uid (:meth:`_agent_loop_postprocess`)."""

    async def _agent_loop_postprocess(self, output: Any, validate: bool, **kwargs: Any) -> None:
        """verl's own method, except for an episode loop's outputs: each agent's is stored under
        its uid (:func:`seat_row`), with the turns' rewards where a turn-level estimator reads
        them, as verl's records (:func:`~teamgym.adapters.verl.tq_writes.trajectory_record`),
        written with those of the sessions that finish at the same time (:class:`PutBatcher`)."""
        if not _is_episode(output):
            return await super()._agent_loop_postprocess(output, validate, **kwargs)
        outputs, records, done_at = output, [], time.time()
        estimator = "" if validate else str(self.config.algorithm.get("adv_estimator", ""))
        for o in outputs:
            row = seat_row(kwargs, o, anchored=estimator in ANCHORED_ESTIMATORS)
            await self._compute_score([o], kwargs=row)  # verl's reward loop, if none was set
            await self._compute_teacher_logprobs(
                o,
                prompt_ids=o.prompt_ids,
                response_ids=o.response_ids,
                validate=validate,
                sample_kwargs=row,
            )
            record = trajectory_record(self, o, row)
            record[2][DONE_AT] = done_at  # for the sampler's wait (adapters/verl/sampler.py)
            if estimator in TURN_ESTIMATORS:  # each turn's reward on its last token
                placed = place_turn_rewards(
                    o.response_mask, o.extra_fields["turn_scores"], float(o.reward_score or 0)
                )
                if placed is not None:
                    record[1]["rm_scores"] = placed
            records.append(record)
        await self._puts().put("val" if validate else "train", records)

    _team_puts: PutBatcher | None = None

    def _puts(self) -> PutBatcher:
        """This worker's batcher of TransferQueue puts (made in the worker's event loop)."""
        if self._team_puts is None:
            self._team_puts = PutBatcher()
        return self._team_puts

    async def _run_prompt(
        self, prompt: dict, sampling_params: dict, trajectory: dict, trace: bool = False
    ) -> None:
        """verl 0.9.1's method (``agent_loop_tq.py``), line for line, except that a row's two
        status puts (running; finished or failure) go through :meth:`_puts` with the other rows'
        of the same moment, and the sessions start without waiting for the ``running`` put
        (verl's replay buffer counts a ``pending`` row as in flight, as a ``running`` one), which
        lands before the terminal status. Pinned by ``tests/adapters/test_verl_v1.py``."""
        uid, partition_id = prompt["uid"], "train" if not trajectory["validate"] else "val"

        async def status(value: str) -> None:
            await self._puts().put(partition_id, [(uid, None, {"status": value})])

        running = asyncio.ensure_future(status("running"))
        tasks = []
        try:
            config = self.config.actor_rollout_ref.rollout
            n = prompt.pop(
                "__rollout_n__", config.n if not trajectory["validate"] else config.val_kwargs.n
            )
            do_sample = prompt.pop("__do_sample__", True)
            run_sampling_params = dict(sampling_params)
            if not trajectory["validate"] and not do_sample:
                apply_greedy_sampling_params(run_sampling_params)
            for i in range(n):  # appended one by one, as verl does: the except waits for them
                task = asyncio.create_task(
                    self._run_agent_loop(
                        run_sampling_params,
                        trajectory=trajectory,
                        trace=trace,
                        session_id=i,
                        **prompt,
                    )
                )
                tasks.append(task)
            # a terminal status only after every session settled (verl's comment: no sibling
            # may write after the replay buffer clears a failed group)
            session_errors = await _settle_session_tasks(tasks)
            for error in session_errors:
                tq_logger.error(
                    f"Error in _run_prompt for uid={uid}",
                    exc_info=(type(error), error, error.__traceback__),
                )
            await running
            await status("failure" if session_errors else "finished")
        except Exception as e:
            tq_logger.exception(f"Error in _run_prompt: {e}")
            if tasks:
                await _settle_session_tasks(tasks)
            await _settle_session_tasks([running])  # the terminal status after it, always
            await status("failure")


class TeamAgentLoopManagerTQ(AgentLoopManagerTQ):
    """verl's v1 ``AgentLoopManagerTQ`` starting :class:`TeamAgentLoopWorkerTQ` actors."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # sets verl's worker class unconditionally
        # cast: an actor class (``@ray.remote`` above), which mypy sees as the plain class
        self.agent_loop_workers_class = cast(Any, TeamAgentLoopWorkerTQ)

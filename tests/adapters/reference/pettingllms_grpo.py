# Verbatim copy of compute_grpo_outcome_advantage from PettingLLMs' vendored verl
# (verl/verl/trainer/ppo/core_algos.py, lines 113-187; Apache-2.0, Bytedance's header below),
# github.com/pettingllms-ai/PettingLLMs commit a054fb18b83f4dc7c1d49aba3b71669d1f93ca71.
# AT-GRPO (PettingLLMs, MIT) calls it with each sample's uid made from the key
# (env_idx // sample_num, turn_idx, agent_idx) in
# pettingllms/trainer/multi_agents_ppo_trainer.py, _assign_consistent_uids (tree mode).
# Used only by tests/adapters/test_credit_reference.py. Not linted.
#
# Copyright 2024 Bytedance Ltd. and/or its affiliates
# Copyright 2022 The HuggingFace Team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
from collections import defaultdict

import numpy as np
import torch


def compute_grpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    mask_truncated_samples: bool = False,
    norm_adv_by_std_in_grpo: str = True,
):
    """
    Compute advantage for GRPO, operating only on Outcome reward
    (with only one scalar reward for each response).
    Args:
        token_level_rewards: `(torch.Tensor)`
            shape is (bs, response_length)
        response_mask: `(torch.Tensor)`
            shape is (bs, response_length)
        norm_adv_by_std_in_grpo: (bool)
            whether to scale the GRPO advantage.
            If True, the advantage is scaled by the std, as in the original GRPO.
            If False, the advantage is not scaled, as in Dr.GRPO (https://arxiv.org/abs/2503.20783).

    Returns:
        advantages: `(torch.Tensor)`
            shape is (bs, response_length)
        Returns: `(torch.Tensor)`
            shape is (bs, response_length)
    """
    response_length = token_level_rewards.shape[-1]
    scores = token_level_rewards.sum(dim=-1)

    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}

    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        
        max_len = 0
        for idx in id2score:
            if len(id2score[idx]) > max_len:
                max_len = len(id2score[idx])

        for idx in id2score:
            if len(id2score[idx]) == 1:
                if max_len == 1:
                    id2mean[idx] = torch.tensor(0.0)
                    id2std[idx] = torch.tensor(1.0)
                else:
                    id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                    id2std[idx] = torch.tensor(0.0)
            elif len(id2score[idx]) > 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor(id2score[idx]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")

        for i in range(bsz):
            if mask_truncated_samples:
                if scores[i] == 0 and response_mask[i].sum() == response_length:
                    scores[i] = 0
                else:
                    if norm_adv_by_std_in_grpo:
                        scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
                    else:
                        scores[i] = scores[i] - id2mean[index[i]]
            else:
                if norm_adv_by_std_in_grpo:
                    scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
                else:
                    scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1) * response_mask

    return scores, scores

"""Bridges to other RL libraries: ``gymnasium`` (one agent as a Gymnasium env, the others
played by baselines; registered as ``teamgym/<id>``) and ``torchrl`` (the PettingZoo wrapper
TorchRL takes, in vector mode)."""

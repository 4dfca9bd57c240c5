"""``thor-assembly-v0``: collaborative assembly in AI2-THOR scenes (symbolic or real backend)."""

from teamgym.envs.thor_assembly.env import ThorAssemblyEnv
from teamgym.envs.thor_assembly.state import AssemblyState

__all__ = ["AssemblyState", "ThorAssemblyEnv"]

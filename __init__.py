"""teamgym: multi-agent text environments for training and benchmarking collaborating LLM agents.

The package is split by job: :mod:`teamgym.envs` (environments, registry, reward sharing,
metrics, wrappers), :mod:`teamgym.adapters` (trainers and other RL libraries) and
:mod:`teamgym.benchmarks` (the ``teamgym`` command line and reports). Importing ``teamgym``
loads none of them.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("teamgym")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]

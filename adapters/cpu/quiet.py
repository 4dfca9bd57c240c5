"""What verl says in the CPU trainer's process that a user cannot act on, kept off the terminal.

The CPU trainer runs verl's agent-loop worker in its own process, with no GPU platform: verl
then warns that no accelerator was found, that its CUDA platform is not available, that its
optional training engines (torchtitan, veomni, Megatron, ...) cannot be imported, prints
"Using dataset class" for every worker it builds, and logs the model's fallback token builder
for every trajectory. None of it concerns a run that does not use them; anything else verl
logs still shows. ``main_ppo`` is left alone (Ray collapses its workers' repeated lines).
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Iterator

__all__ = ["quiet_verl", "silent_stdout"]

#: verl's optional engines, warned about at import when their package is missing.
_ENGINES = r"(torchtitan|veomni|automodel|mindspeed|megatron) engine is not available"
#: Log lines dropped: no GPU platform is what the CPU trainer expects.
_DROPPED = ("No supported accelerator detected", "is registered but not available")
#: Log lines shown once per distinct text (verl logs them per trajectory).
_ONCE = ("No model-specific Continuous Token builder",)
_LOGGERS = (
    "verl.plugin.platform.platform_manager",
    "verl.utils.tokenizer.continuous_token_wiring",
)


class _VerlFilter(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if any(part in text for part in _DROPPED):
            return False
        if text.startswith(_ONCE):
            if text in self.seen:
                return False
            self.seen.add(text)
        return True


_FILTER = _VerlFilter()


def quiet_verl() -> None:
    """Install the filters (idempotent): call before verl is imported."""
    warnings.filterwarnings("ignore", message=_ENGINES, category=UserWarning)
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


@contextlib.contextmanager
def silent_stdout() -> Iterator[None]:
    """Swallow what is printed inside (verl's worker prints its dataset class on every build)."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield

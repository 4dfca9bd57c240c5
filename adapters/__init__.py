"""How trainers and other RL libraries reach teamgym environments.

Each adapter lives in its own module and imports its heavy dependencies (torch, verl, an
HTTP client) only when it is used, so ``import teamgym.adapters`` stays cheap and offline.
"""

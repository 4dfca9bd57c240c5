"""Reference implementations the turn-level estimators are checked against, copied verbatim
from their repositories (licences and commits in each file's header); not teamgym's code."""

"""teamgym environments: the registry, the text env base, reward sharing, metrics and wrappers.

>>> from teamgym.envs import make
>>> env = make("signal-v1", num_agents=3)
>>> obs, infos = env.reset(seed=0)
>>> sorted(obs)
['robot_0', 'robot_1', 'robot_2']

Importing this package is cheap and offline: games load when ``make`` first needs them. It also
lists every id in Gymnasium's registry as ``teamgym/<id>`` (strings only; see ``register``), so
``gymnasium.make("teamgym/foraging-v0", obs_mode="vector")`` needs no other import.
"""

from teamgym.envs.metrics import EpisodeMetrics, EpisodeTracker
from teamgym.envs.parsing import ParsedReply, parse_reply
from teamgym.envs.registration import EnvSpec, make, register, registry, spec
from teamgym.envs.sharing import RewardSharing, register_sharing_mode
from teamgym.envs.text_env import GameStep, TextParallelEnv
from teamgym.envs.wrappers import Recorder, SharedReward

__all__ = [
    "EnvSpec",
    "EpisodeMetrics",
    "EpisodeTracker",
    "GameStep",
    "ParsedReply",
    "Recorder",
    "RewardSharing",
    "SharedReward",
    "TextParallelEnv",
    "make",
    "parse_reply",
    "register",
    "register_sharing_mode",
    "registry",
    "spec",
]

# Built-in environments: data, not imports. A behaviour change bumps the version.
_SIGNAL_BASELINES = {
    "expert": "teamgym.envs.signal.baselines:SignalExpert",
    "babbler": "teamgym.envs.signal.baselines:SignalBabbler",
    "palette-babbler": "teamgym.envs.signal.baselines:SignalPaletteBabbler",
    "any-order-babbler": "teamgym.envs.signal.baselines:SignalAnyOrderBabbler",
}
register(
    "signal-v1",
    "teamgym.envs.signal:SignalEnv",
    description="Referential game: a speaker sees the target, listeners must pick it; reward only on a right pick.",
    baselines=_SIGNAL_BASELINES,
)
# 0.1.0's signal game, byte for byte: a step that only carried messages read "Nothing happened."
register(
    "signal-v0",
    "teamgym.envs.signal:SignalEnv",
    description="signal-v1 with 0.1.0's feedback wording (superseded by signal-v1).",
    baselines=_SIGNAL_BASELINES,
    message_feedback=False,
)
_FORAGING_BASELINES = {"expert": "teamgym.envs.foraging.baselines:ForagingExpert"}
register(
    "foraging-v1",
    "teamgym.envs.foraging:ForagingEnv",
    description="Level-based foraging: an item loads only when the adjacent loaders' levels add up to its level.",
    baselines=_FORAGING_BASELINES,
)
# 0.1.0's foraging, byte for byte: every legal action's feedback read "Nothing happened."
register(
    "foraging-v0",
    "teamgym.envs.foraging:ForagingEnv",
    description="foraging-v1 with 0.1.0's feedback wording (superseded by foraging-v1).",
    baselines=_FORAGING_BASELINES,
    feedback="legacy",
)
register(
    "keydoor-v0",
    "teamgym.envs.keydoor:KeyDoorEnv",
    description="Two rooms: one agent holds the plate that keeps the door open while another fetches the treasure.",
    baselines={"expert": "teamgym.envs.keydoor.baselines:KeyDoorExpert"},
)
register(
    "publicgoods-v0",
    "teamgym.envs.publicgoods:PublicGoodsEnv",
    description="Repeated public-goods game: free-riding pays each agent, contributing pays the team.",
    baselines={
        "expert": "teamgym.envs.publicgoods.baselines:Contributor",
        "freerider": "teamgym.envs.publicgoods.baselines:FreeRider",
    },
)
register(
    "thor-assembly-v0",
    "teamgym.envs.thor_assembly:ThorAssemblyEnv",
    description="Robots in an iTHOR scene fetch parts, connect them with joint actions and pass an inspection.",
    baselines={"expert": "teamgym.envs.thor_assembly.baselines:ThorExpert"},
    message_feedback=False,  # 0.1.0's wording; its rules give every action feedback anyway
)
register(
    "hanabi-v0",
    "teamgym.envs.hanabi:HanabiEnv",
    description="Hanabi: players see each other's cards but not their own, and build five fireworks together from hints.",
    baselines={"expert": "teamgym.envs.hanabi.baselines:HanabiConventions"},
)
register(
    "kitchen-v0",
    "teamgym.envs.kitchen:KitchenEnv",
    description="Overcooked-AI's kitchen: two chefs cook onion soups (3 onions, cook, plate, serve) on its classic layouts.",
    baselines={"expert": "teamgym.envs.kitchen.baselines:KitchenPlanner"},
)

"""Neural policies over a game's structured view: observation tensor + action mask.

`PolicySpec` says what a game shows and takes (read from its spaces by `spec_from_core`);
`build_policy` makes its network, always of the one family
`arena.inference.structured.StructuredPolicyNet` (every move an action model; a one-tensor game's
is one part). The architecture names the encoder:

* ``mlp``: a flat observation (poker's information-state vector) through an MLP;
* ``conv``: board planes ``[C, H, W]`` (connect four, tic-tac-toe) through a small residual conv
  net, then an MLP;
* ``entity``: a variable-length set of entities ``{"entities": [N, F], "entity_mask": [N]}``
  through a transformer (`arena.inference.entity.EntityEncoder`, AlphaStar's and SCC's design),
  with a pointer head that selects among them (`arena.inference.entity.PointerHead`) when the
  game's actions are "pick an entity";
* ``structured``: a game with structured moves (`arena.envs.actions.ActionModel`: an action
  type, units by pointer, a target or a cell) or several observation inputs (entities, a map,
  scalars): an encoder per input and a head per part of the move.

A policy reads a dict of arrays (`policy_inputs`): ``{"obs", "mask"}`` (and ``"entity_mask"``
for entity sets) for a game with one observation tensor, the game's own keys otherwise. Rollout
batches stack those dicts (`arena.inference.trees`).

Heads: discrete actions are a `MaskedCategorical` (an illegal move has probability 0 and is
never sampled); continuous actions a Gaussian or Beta over the action box
(`arena.inference.continuous`). A value head reads the same features and, where the game
exposes it, privileged information (every player's view: both hands in poker), which only the
critic sees; the policy never does.

A policy checkpoint is a folder with ``policy.pt`` (the spec, the architecture and its sizes,
the weights): `save_policy` / `load_policy`. `policy:<folder>` plays it
(`arena.agents.neural`). A checkpoint of format version 1 (before one-tensor games' networks
joined the structured family) loads as it is: `load_policy` renames its tensors to the one
family's (`upgrade_state`; the same weights, the same outputs) and the next save writes version 2.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from arena.errors import AgentSpecError, IncompatibleAgent
from arena.inference.distributions import MaskedCategorical  # noqa: F401  (the categorical policies' distribution)

FORMAT = "arena-policy"
#: 2: every network is of the one family (`StructuredPolicyNet`); 1 (read, upgraded): one-tensor games
#: had their own network class.
VERSION = 2
FILE = "policy.pt"

ARCHS = ("auto", "mlp", "conv", "entity", "structured")


def _torch():
    from arena.errors import require

    return require("torch", "neural policies", "llm")


@dataclass(frozen=True)
class PolicySpec:
    """What a policy reads and writes, from the game's spaces (the checkpoint keeps it: a policy
    plays only a game that shows and takes the same)."""

    game_id: str
    #: The observation tensor's shape (entity games: ``(N, F)`` of the entity list).
    obs_shape: tuple[int, ...]
    action_kind: str = "discrete"  # "discrete" | "continuous"
    #: Discrete: the number of actions (the mask's length).
    n_actions: int = 0
    #: Continuous: the action vector's shape and its box.
    action_shape: tuple[int, ...] = ()
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()
    #: Observations are entity sets (``{"entities", "entity_mask"}``), not one tensor.
    entities: bool = False
    #: Length of the privileged vector the critic may read (0: none).
    privileged_dim: int = 0
    #: Seats the policy may play (> 0: a one-hot of the seat to move is part of its input). Games like
    #: OpenSpiel's board games encode the board absolutely (X's pieces, O's pieces), not "mine" and
    #: "theirs": one network playing both seats must be told which one it is.
    players: int = 0
    #: Structured games: the observation's keys and shapes (``((key, shape), ...)``), and the action
    #: model (`arena.envs.actions.ActionModel.to_dict`). Empty / None for one-tensor games.
    inputs: tuple = ()
    action: dict | None = None

    @cached_property
    def input_dtypes(self) -> tuple[tuple[str, Any], ...]:
        """Structured games: each input key with the dtype a policy reads it as (masks bool, the rest
        float32); worked out once per spec, not once a move."""
        from arena.envs.actions import ActionModel

        masks = ActionModel.from_dict(self.action).mask_keys
        return tuple((k, bool if k in masks else np.float32) for k, _ in self.inputs)

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The network's input: the observation with the seat planes (board planes) or features (vectors)."""
        if not self.players or self.entities:
            return self.obs_shape
        if len(self.obs_shape) == 3:
            c, h, w = self.obs_shape
            return (c + self.players, h, w)
        return (int(math.prod(self.obs_shape)) + self.players,)

    @property
    def box_moves(self) -> bool:
        """Whether the moves (or a part of them) are drawn from a box: no finite set of choices."""
        return self.action_kind == "continuous" or (
            self.action is not None and any(p.get("kind") == "box" for p in self.action["parts"]))

    def describe(self) -> str:
        if self.action is not None:
            from arena.envs.actions import ActionModel

            keys = ", ".join(f"{k} {tuple(v)}" for k, v in self.inputs)
            return f"{self.game_id} (inputs {keys}; moves {ActionModel.from_dict(self.action).describe()})"
        act = f"{self.n_actions} actions" if self.action_kind == "discrete" else f"actions {self.action_shape}"
        obs = f"entities {self.obs_shape}" if self.entities else f"observation {self.obs_shape}"
        return f"{self.game_id} ({obs}, {act})"

    def same_interface(self, other: "PolicySpec") -> bool:
        return (self.obs_shape, self.action_kind, self.n_actions, self.action_shape, self.entities, self.players,
                self.inputs, self.action) == \
            (other.obs_shape, other.action_kind, other.n_actions, other.action_shape, other.entities, other.players,
             other.inputs, other.action)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PolicySpec":
        d = dict(d)
        for k in ("obs_shape", "action_shape", "low", "high"):
            d[k] = tuple(d.get(k) or ())
        d["inputs"] = tuple((str(k), tuple(int(x) for x in shape)) for k, shape in d.get("inputs") or ())
        if d.get("action") is not None:
            from arena.envs.actions import ActionModel

            d["action"] = ActionModel.from_dict(d["action"]).to_dict()  # checked, in one normal form
        return cls(**d)


def spec_from_core(core: Any, seat: int = 0) -> PolicySpec:
    """The `PolicySpec` of a game core; `IncompatibleAgent` when it has no tensor view (text games)."""
    from gymnasium import spaces

    obs_space = core.observation_space(seat)
    act_space = core.action_space(seat)
    priv = int(core.privileged_dim or 0)
    if core.action_kind == "structured":
        if not isinstance(obs_space, spaces.Dict):
            raise IncompatibleAgent(f"{core.game_id} has structured moves but no dict observation: a neural "
                                    "policy reads the game's named arrays")
        model = core.action_model(seat)
        inputs = tuple((k, tuple(int(x) for x in sp.shape)) for k, sp in obs_space.spaces.items()
                       if isinstance(sp, spaces.Box))
        ent = dict(inputs).get(model.entities)
        return PolicySpec(core.game_id, tuple(ent or ()), "structured", entities=ent is not None,
                          privileged_dim=priv, inputs=inputs, action=model.to_dict())
    entities = False
    if isinstance(obs_space, spaces.Dict) and "entities" in obs_space.spaces:
        shape, entities = tuple(obs_space["entities"].shape), True
    elif isinstance(obs_space, spaces.Dict) and isinstance(obs_space.spaces.get("observation"), spaces.Box):
        shape = tuple(obs_space["observation"].shape)
    elif isinstance(obs_space, spaces.Box):
        shape = tuple(obs_space.shape)
    else:
        raise IncompatibleAgent(f"{core.game_id} shows no observation tensor (a text game): a neural policy "
                                "needs one; play it with an llm: or search agent")
    players = len(core.players) if len(core.players) > 1 and not entities else 0
    if isinstance(act_space, spaces.Discrete):
        return PolicySpec(core.game_id, shape, "discrete", n_actions=int(act_space.n), entities=entities,
                          privileged_dim=priv, players=players)
    if isinstance(act_space, spaces.Box):
        return PolicySpec(core.game_id, shape, "continuous", action_shape=tuple(act_space.shape),
                          low=tuple(np.broadcast_to(act_space.low, act_space.shape).ravel().tolist()),
                          high=tuple(np.broadcast_to(act_space.high, act_space.shape).ravel().tolist()),
                          entities=entities, privileged_dim=priv, players=players)
    raise IncompatibleAgent(f"{core.game_id} has actions {act_space}: a neural policy takes Discrete or Box actions")


def observation_arrays(raw: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(observation tensor, action mask or None) of a core's structured observation."""
    if isinstance(raw, dict):
        obs = raw.get("observation")
        if obs is None and "entities" in raw:
            return np.asarray(raw["entities"], dtype=np.float32), raw.get("action_mask")
        return np.asarray(obs, dtype=np.float32), raw.get("action_mask")
    return np.asarray(raw, dtype=np.float32), None


def policy_input(raw: Any, seat: int, spec: PolicySpec) -> tuple[np.ndarray, np.ndarray | None]:
    """(network input, action mask) of the structured observation `raw` seen from `seat`: the
    observation tensor with a one-hot of the seat appended (constant planes for board planes,
    features for vectors) when ``spec.players``."""
    x, m = observation_arrays(raw)
    if not spec.players or spec.entities:
        return x, m
    if x.ndim == 3:
        planes = np.zeros((spec.players, *x.shape[1:]), dtype=np.float32)
        planes[seat] = 1.0
        return np.concatenate([x, planes]), m
    onehot = np.zeros(spec.players, dtype=np.float32)
    onehot[seat] = 1.0
    return np.concatenate([x.ravel(), onehot]), m


def policy_inputs(raw: Any, seat: int, spec: PolicySpec) -> dict[str, np.ndarray]:
    """What a policy reads of the structured observation `raw` seen from `seat`, as a dict of arrays:
    a structured game's own keys (masks as bool, the rest float32); for a one-tensor game the network
    input (`policy_input`) as ``"obs"``, its action mask as ``"mask"`` and, for entity sets, the
    ``"entity_mask"``."""
    if spec.action is not None:
        return {k: np.asarray(raw[k], dtype=dt) for k, dt in spec.input_dtypes}
    x, m = policy_input(raw, seat, spec)
    out = {"obs": x}
    if m is not None:
        out["mask"] = np.asarray(m, dtype=bool)
    if spec.entities and isinstance(raw, dict) and "entity_mask" in raw:
        out["entity_mask"] = np.asarray(raw["entity_mask"], dtype=bool)
    return out


def privileged_vector(core: Any) -> np.ndarray | None:
    """What a privileged critic reads in a game of hidden information: every player's observation
    tensor, concatenated (both hands in poker); None where the game has none (``privileged_dim`` 0)."""
    if not core.privileged_dim:
        return None
    return np.asarray(core.all_observations(), dtype=np.float32).ravel()


# -- networks ---------------------------------------------------------------------------------
DEFAULT_SIZES = {"hidden": [128, 128], "channels": 32, "blocks": 1, "d_model": 64, "layers": 2, "heads": 4,
                 "value_hidden": 128, "continuous": "gaussian", "init_log_std": -0.5, "obs_norm": False,
                 "q_head": False}


def _choose_arch(spec: PolicySpec, arch: str) -> str:
    if arch not in ARCHS:
        raise ValueError(f"policy architecture {arch!r} is not one of {', '.join(ARCHS)}")
    if spec.action is not None:
        if arch not in ("auto", "structured"):
            raise ValueError(f"{spec.game_id} has structured moves: its policy is arch structured (or auto), not {arch}")
        return "structured"
    if arch == "structured":
        raise ValueError(f"arch structured is for games with structured moves; {spec.game_id} has {spec.action_kind} ones")
    if arch != "auto":
        if arch == "conv" and len(spec.obs_shape) != 3:
            raise ValueError(f"a conv policy needs board planes [C, H, W]; {spec.game_id} shows {spec.obs_shape}")
        if arch == "entity" and not spec.entities:
            raise ValueError(f"an entity policy needs an entity-list observation; {spec.game_id} shows a tensor")
        return arch
    if spec.entities:
        return "entity"
    return "conv" if len(spec.obs_shape) == 3 else "mlp"


def build_policy(spec: PolicySpec, arch: str = "auto", **sizes: Any):
    """The policy network (`arena.inference.structured.StructuredPolicyNet`) for `spec`; `sizes`
    override `DEFAULT_SIZES` (unknown keys are an error)."""
    unknown = set(sizes) - set(DEFAULT_SIZES)
    if unknown:
        raise ValueError(f"unknown policy size {sorted(unknown)[0]!r}; known: {', '.join(DEFAULT_SIZES)}")
    chosen = _choose_arch(spec, arch)
    _torch()  # a one-line error naming the extra where torch is missing
    from arena.inference.structured import StructuredPolicyNet

    return StructuredPolicyNet(spec, chosen, {**DEFAULT_SIZES, **sizes})


# -- checkpoints --------------------------------------------------------------------------------
@dataclass
class PolicyMeta:
    """What a checkpoint says about itself besides its weights."""

    spec: PolicySpec
    arch: str
    sizes: dict
    #: Free-form: the run, its iteration, the role of the player that trained it.
    info: dict = field(default_factory=dict)


def save_policy(folder: str | Path, net: Any, info: dict | None = None) -> Path:
    """Write ``folder/policy.pt`` atomically; returns the folder."""
    torch = _torch()
    from arena.fsio import atomic_write

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    blob = {"format": FORMAT, "version": VERSION, "spec": net.spec.to_dict(), "arch": net.arch, "sizes": net.sizes,
            "info": dict(info or {}), "state_dict": {k: v.detach().cpu() for k, v in net.state_dict().items()}}
    atomic_write(folder / FILE, lambda f: torch.save(blob, f))
    return folder


def policy_file(path: str | Path) -> Path:
    """The ``policy.pt`` a path names: the file itself, or a checkpoint folder holding one (a run's
    ``best`` and ``latest`` links are such folders)."""
    p = Path(path)
    if p.is_dir():
        return p / FILE
    return p


#: Bounds of a checkpoint (`load_policy`): a policy file comes from a run folder, a league or another
#: person, and its recorded sizes say how much memory building its network takes (a 370 KB file
#: declaring hidden layers of 30,000 units asks for gigabytes). The largest networks this project
#: trains have under 1M parameters (Connect Four's conv net, 64 channels, 2 blocks, hidden [256]: about
#: 0.8M; the SC2 and skirmish structured nets less); 50M is far above them and 200 MB of float32.
MAX_POLICY_PARAMS = 50_000_000
#: The file, and what its zip archive holds once unpacked (50M float64 parameters and the pickle).
MAX_CHECKPOINT_BYTES = 512 * 2 ** 20
#: Structural bounds read before the parameter count is worked out: hidden layers, units of a layer,
#: residual blocks and transformer layers, attention heads, a tensor's elements (observation, inputs,
#: actions), observation inputs and action parts.
MAX_HIDDEN_LAYERS, MAX_WIDTH, MAX_BLOCKS, MAX_HEADS = 32, 65_536, 64, 256
MAX_ELEMENTS, MAX_INPUTS, MAX_PARTS = 2 ** 24, 64, 64


def _whole(v: Any, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _elements(shape: Any, what: str, f: Path) -> int:
    """The element count of a recorded shape, or a one-line refusal."""
    from arena.errors import shown

    if not isinstance(shape, (list, tuple)) or len(shape) > 8 or not all(_whole(x, 0, MAX_ELEMENTS) for x in shape):
        raise AgentSpecError(f"{f}: refused: {what} {shown(shape, 80)} is not a shape (at most 8 sizes, each at most "
                             f"{MAX_ELEMENTS:,})")
    n = math.prod(shape)
    if n > MAX_ELEMENTS:
        raise AgentSpecError(f"{f}: refused: {what} {shown(shape, 80)} has {n:,} elements (at most {MAX_ELEMENTS:,})")
    return n


def _check_recorded_sizes(blob: dict, f: Path) -> None:
    """The sizes a checkpoint records (its spec's shapes and its architecture's sizes), each within the
    bounds above, before anything is built from them; a one-line `AgentSpecError` for the first that is
    not."""
    from arena.errors import shown

    spec, sizes = blob.get("spec"), blob.get("sizes")
    if not isinstance(spec, dict) or not isinstance(sizes, dict) or not isinstance(blob.get("arch"), str) \
            or not isinstance(blob.get("state_dict"), dict):
        raise AgentSpecError(f"{f} is not a policy checkpoint (its spec, arch, sizes or state_dict is missing)")
    unknown = [k for k in sizes if k not in DEFAULT_SIZES]
    if unknown:
        raise AgentSpecError(f"{f}: refused: unknown policy size {shown(unknown[0], 60)} "
                             f"(known: {', '.join(DEFAULT_SIZES)})")

    def bad(name: str, value: Any, what: str) -> AgentSpecError:
        return AgentSpecError(f"{f}: refused: recorded size {name} = {shown(value, 80)}, expected {what}")

    hidden = sizes.get("hidden", DEFAULT_SIZES["hidden"])
    if not isinstance(hidden, (list, tuple)) or not 1 <= len(hidden) <= MAX_HIDDEN_LAYERS \
            or not all(_whole(h, 1, MAX_WIDTH) for h in hidden):
        raise bad("hidden", hidden, f"1 to {MAX_HIDDEN_LAYERS} layers of 1 to {MAX_WIDTH:,} units")
    for name, lo, hi in (("channels", 1, MAX_WIDTH), ("d_model", 1, MAX_WIDTH), ("value_hidden", 1, MAX_WIDTH),
                         ("blocks", 0, MAX_BLOCKS), ("layers", 0, MAX_BLOCKS), ("heads", 1, MAX_HEADS)):
        v = sizes.get(name, DEFAULT_SIZES[name])
        if not _whole(v, lo, hi):
            raise bad(name, v, f"a whole number in [{lo}, {hi:,}]")
    if sizes.get("continuous", "gaussian") not in ("gaussian", "beta"):
        raise bad("continuous", sizes.get("continuous"), "gaussian or beta")
    log_std = sizes.get("init_log_std", -0.5)
    if isinstance(log_std, bool) or not isinstance(log_std, (int, float)) or not math.isfinite(log_std):
        raise bad("init_log_std", log_std, "a finite number")
    if not isinstance(sizes.get("obs_norm", False), bool):
        raise bad("obs_norm", sizes.get("obs_norm"), "true or false")

    _elements(spec.get("obs_shape") or (), "its observation shape", f)
    act = _elements(spec.get("action_shape") or (), "its action shape", f)
    for k in ("low", "high"):
        v = spec.get(k) or ()
        if not isinstance(v, (list, tuple)) or len(v) > max(act, 1):
            n = len(v) if isinstance(v, (list, tuple)) else "?"
            raise AgentSpecError(f"{f}: refused: its action box's {k} has {n} components for an action of {act}")
    for k, hi in (("n_actions", MAX_ELEMENTS), ("privileged_dim", MAX_ELEMENTS), ("players", 64)):
        v = spec.get(k, 0)
        if not _whole(v, 0, hi):
            raise AgentSpecError(f"{f}: refused: its {k} {shown(v, 80)} is not a whole number in [0, {hi:,}]")
    inputs = spec.get("inputs") or ()
    if not isinstance(inputs, (list, tuple)) or len(inputs) > MAX_INPUTS:
        raise AgentSpecError(f"{f}: refused: its observation has more than {MAX_INPUTS} inputs")
    for item in inputs:
        if not isinstance(item, (list, tuple)) or len(item) != 2 or not isinstance(item[0], str):
            raise AgentSpecError(f"{f}: refused: its inputs are not (key, shape) pairs")
        _elements(item[1], f"its input {shown(item[0], 40)}'s shape", f)
    action = spec.get("action")
    if action is not None:
        parts = action.get("parts") if isinstance(action, dict) else None
        uses = action.get("uses") if isinstance(action, dict) else None
        if not isinstance(parts, (list, tuple)) or not 1 <= len(parts) <= MAX_PARTS \
                or (uses is not None and (not isinstance(uses, (list, tuple)) or len(uses) > 4096)):
            raise AgentSpecError(f"{f}: refused: its action model is not 1 to {MAX_PARTS} parts")
        for part in parts:
            if not isinstance(part, dict) or not _whole(part.get("n", 0), 0, MAX_ELEMENTS):
                raise AgentSpecError(f"{f}: refused: an action part of more than {MAX_ELEMENTS:,} choices")
            n = _elements(part.get("shape") or (), "an action part's shape", f)
            for k in ("low", "high", "labels"):
                v = part.get(k) or ()
                if not isinstance(v, (list, tuple)) or len(v) > max(n, part.get("n", 0), 1):
                    raise AgentSpecError(f"{f}: refused: an action part's {k} is longer than the part")


def _parameter_count_and_shapes(spec: PolicySpec, arch: str, sizes: dict) -> tuple[int, dict[str, tuple]]:
    """(parameters and buffers, each state-dict entry's shape) of the network `build_policy` would make,
    worked out on torch's meta device: no memory is allocated for them."""
    torch = _torch()
    with torch.device("meta"):
        net = build_policy(spec, arch, **sizes)
    state = net.state_dict()  # parameters and the buffers a checkpoint carries
    return int(sum(v.numel() for v in state.values())), {k: tuple(v.shape) for k, v in state.items()}


def _check_archive(f: Path) -> None:
    """The file and, for the zip archive `torch.save` writes, what it unpacks to, within
    `MAX_CHECKPOINT_BYTES` (an entry may be compressed: the archive's own sizes are read, not trusted
    to the file's)."""
    import zipfile

    size = f.stat().st_size
    if size > MAX_CHECKPOINT_BYTES:
        raise AgentSpecError(f"{f}: refused: the file is {size:,} bytes (a policy checkpoint is at most "
                             f"{MAX_CHECKPOINT_BYTES:,})")
    if zipfile.is_zipfile(f):
        try:
            with zipfile.ZipFile(f) as z:
                infos = z.infolist()
        except (zipfile.BadZipFile, OSError, ValueError) as e:
            raise AgentSpecError(f"{f} is not a readable policy checkpoint (BadZipFile: {e})") from None
        total = sum(i.file_size for i in infos)
        if total > MAX_CHECKPOINT_BYTES or len(infos) > 100_000:
            raise AgentSpecError(f"{f}: refused: the checkpoint unpacks to {total:,} bytes in {len(infos):,} records "
                                 f"(at most {MAX_CHECKPOINT_BYTES:,})")


def load_policy(path: str | Path, expect: PolicySpec | None = None):
    """(net in eval mode, `PolicyMeta`) of a checkpoint. A missing checkpoint, another format, or one
    trained for other spaces than `expect` is an `AgentSpecError` naming the path and what was expected.

    A checkpoint is data from anywhere: it is read with ``weights_only=True`` (tensors and plain data,
    never a pickled object), its file and unpacked size are bounded (`MAX_CHECKPOINT_BYTES`), the sizes
    it records are checked (`_check_recorded_sizes`) and the parameter count of the network they
    describe worked out without allocating it (`MAX_POLICY_PARAMS`) before the network is built, and
    every tensor of its state dict must have the shape that network gives it: each refusal one line."""
    torch = _torch()
    f = policy_file(path)
    if not f.exists():
        hint = " (a run folder? use its best or latest checkpoint, e.g. runs/c4/best)" \
            if Path(path).is_dir() and ((Path(path) / "best").exists() or (Path(path) / "latest").exists()) else ""
        raise AgentSpecError(f"no policy checkpoint at {path}: expected a folder with {FILE}{hint}")
    _check_archive(f)
    try:
        blob = torch.load(f, map_location="cpu", weights_only=True)
    except Exception as e:
        msg = " ".join(str(e).split())
        raise AgentSpecError(f"{f} is not a readable policy checkpoint ({type(e).__name__}: {msg[:300]})") from None
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        from arena.errors import shown

        raise AgentSpecError(f"{f} is not a policy checkpoint (format "
                             f"{shown(blob.get('format'), 60) if isinstance(blob, dict) else type(blob).__name__!r})")
    version = blob.get("version")
    if version not in (1, VERSION):
        from arena.errors import shown

        raise AgentSpecError(f"{f}: checkpoint format version {shown(version, 20)} is not one this arena reads "
                             f"(1 or {VERSION}); a newer arena wrote it: upgrade arena to play it")
    _check_recorded_sizes(blob, f)
    if version == 1:
        blob["state_dict"] = upgrade_state(blob["state_dict"], blob["arch"])
    try:
        spec = PolicySpec.from_dict(blob["spec"])
    except (TypeError, ValueError, KeyError) as e:
        raise AgentSpecError(f"{f}: refused: its spec is not a policy spec "
                             f"({type(e).__name__}: {' '.join(str(e).split())[:200]})") from None
    if expect is not None and (spec.game_id != expect.game_id or not spec.same_interface(expect)):
        raise AgentSpecError(f"policy {path} was trained for {spec.describe()}; this game is {expect.describe()}")
    arch, sizes = blob["arch"], blob["sizes"]
    try:
        count, shapes = _parameter_count_and_shapes(spec, arch, sizes)
    except (TypeError, ValueError, RuntimeError) as e:
        raise AgentSpecError(f"{f}: refused: its sizes do not make a network ({type(e).__name__}: "
                             f"{' '.join(str(e).split())[:200]})") from None
    if count > MAX_POLICY_PARAMS:
        raise AgentSpecError(f"{f}: refused: its recorded sizes make a network of {count:,} parameters (at most "
                             f"{MAX_POLICY_PARAMS:,}); arch {arch}, sizes {_sizes_text(sizes)}")
    state = blob["state_dict"]
    for k, shape in shapes.items():
        t = state.get(k)
        if not isinstance(t, torch.Tensor):
            raise AgentSpecError(f"{f}: refused: its state dict has no tensor {k!r} (the network its sizes "
                                 "describe has one)")
        if tuple(t.shape) != shape:
            raise AgentSpecError(f"{f}: refused: tensor {k!r} has shape {tuple(t.shape)}, but its recorded sizes give "
                                 f"{shape}")
    extra = [k for k in state if k not in shapes]
    if extra:
        from arena.errors import shown

        raise AgentSpecError(f"{f}: refused: its state dict has {len(extra)} tensor(s) the network has not, e.g. "
                             f"{shown(extra[0], 80)}")
    net = build_policy(spec, arch, **sizes)
    net.load_state_dict(state)
    net.eval()
    return net, PolicyMeta(spec, arch, sizes, blob.get("info", {}))


#: Version 1's one-tensor network (``mlp``, ``conv``, ``entity``): its modules' names -> the one family's.
_V1_NAMES = (("stem.", "encoders.of_obs."), ("logits.", "heads.to_action.logits."),
             ("pointer.", "heads.to_action.pointer."), ("head.", "heads.to_action.dist."))


def upgrade_state(state: dict, arch: str) -> dict:
    """A version-1 checkpoint's state dict as the one family names it: a one-tensor network's
    encoder and head move under ``encoders.of_obs`` and ``heads.to_action``; a structured network's
    names are unchanged. The weights are the same, and so are the outputs (tested)."""
    if arch == "structured":
        return dict(state)
    out = {}
    for k, v in state.items():
        for old, new in _V1_NAMES:
            if k.startswith(old):
                k = new + k[len(old):]
                break
        out[k] = v
    return out


def _sizes_text(sizes: dict) -> str:
    from arena.errors import shown

    return shown({k: v for k, v in sizes.items() if k in ("hidden", "channels", "blocks", "d_model", "layers", "heads",
                                                             "value_hidden")}, 120)

"""SCC's first stage: behaviour cloning from the matches of chosen players.

What a chosen player saw before each of its moves (the observation tensor and action mask), and
a teacher's answer there where one is asked, is kept as the match is played: the engine observes
those seats (`arena.match.observe`, ``MatchResult.observed``) and `from_observed` turns the moves
into `Demonstrations`; the trainer writes each committed group of them to its run folder
(`save_demonstrations`), so a restarted run reads them back. Replays keep actions, not tensors:
for matches this run did not play (another league's replays), `demonstrations` re-simulates each
replay through its game (`arena.match.verify.observed_moves`) to recover the same views, and the
same `from_observed` converts them. The matches (not the moves) are split into training and validation
sets, so no position of a validation game is trained on; training minimises the cross-entropy
of the teacher's move under the masked policy, or of its action probabilities where its strategy
can be read (CFR's table: the whole strategy, not one sample of it), and, with a small weight, the
value head's error on the final outcome (a warm critic for RL); it stops when the validation loss has not improved
for ``patience`` epochs and keeps the best epoch's weights. That policy is the KL anchor of the RL
stage.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from arena.errors import ArenaError
from arena.match.observe import strategy_reader  # noqa: F401  (imitation's readers are the engine's)
from arena.replays.format import Replay


@dataclass
class Demonstrations:
    #: What the network reads at each move, a dict of ``[N, ...]`` arrays for every game
    #: (`arena.inference.policy_nets.policy_inputs`: a one-tensor game's ``obs`` and ``mask``, a
    #: structured game's own keys).
    obs: dict
    #: ``[N]``, or a dict of the parts' ``[N, ...]`` arrays (structured moves).
    actions: Any
    outcome: np.ndarray  # [N]: the final return of the player who moved
    match: np.ndarray  # [N]: which replay each move came from
    privileged: np.ndarray | None = None
    #: ``[N, A]``: the teacher's probability of each action where its strategy can be read (a CFR
    #: table: `BaseAgent.action_probabilities`), else None; imitation then fits these, not the moves.
    probs: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.actions)

    def take(self, idx: np.ndarray) -> "Demonstrations":
        from arena.inference.trees import tree_map

        take = lambda x: x[idx]  # noqa: E731
        return Demonstrations(tree_map(take, self.obs), tree_map(take, self.actions),
                              self.outcome[idx], self.match[idx],
                              None if self.privileged is None else self.privileged[idx],
                              None if self.probs is None else self.probs[idx])


def demonstrations(replays: Sequence[tuple[Replay, Sequence[str]]], players: set[str] | None, spec: Any,
                   reward_scale: float = 1.0, targets: str = "auto", label: str | None = None,
                   workers: int = 1, first: int = 0,
                   progress: Callable[[int], None] | None = None) -> Demonstrations:
    """The moves of the named league players in `replays` (each with its seats' league names), with
    the views re-simulated (as the network reads them: `arena.inference.policy_nets.policy_input` for
    `spec`). A replay's agent specs match too (replays from outside a league). This is the path for
    matches this run did not play (``il.league``: another league's replays); the matches a run plays
    itself keep what the players saw as they played (`from_observed`), and nothing re-simulates them.

    ``targets="auto"``: where every chosen seat's agent (rebuilt from the replay's spec) has a strategy
    that can be read (`BaseAgent.action_probabilities`: CFR's table; or a search's policy,
    `BaseAgent.search_policy`: MCTS's root visit shares), each move
    also carries that strategy's probabilities at the position (`Demonstrations.probs`), which imitation
    then fits; ``"moves"``: the moves alone. `label` (an agent spec whose strategy can be read) answers
    at every position instead of the seat's own agent: the matches give the positions, the labeller the
    targets (a strong search labelling the positions of cheaper players). A reader is seeded afresh for
    each replay (`first` + its index), so the targets do not depend on `workers`, the processes that
    share the replays when there are readers to ask (a search's answers cost more than the re-simulation).
    `progress` is told how many replays are done, now and then."""
    found = collect(replays, players, spec, reward_scale, targets, label, workers, first, progress)
    if found is None:
        raise ValueError(f"no moves of {sorted(players) if players else 'any player'} in {len(replays)} replays")
    return found


def collect(replays: Sequence[tuple[Replay, Sequence[str]]], players: set[str] | None, spec: Any,
            reward_scale: float = 1.0, targets: str = "auto", label: str | None = None, workers: int = 1,
            first: int = 0, progress: Callable[[int], None] | None = None) -> Demonstrations | None:
    """`demonstrations`, None where no chosen player moved in `replays`."""
    reading = asks(spec, targets, label) is not None
    if workers > 1 and reading and len(replays) >= 2 * workers:
        parts = _collect_in_parallel(replays, players, spec, reward_scale, label, workers, progress)
        return joined(parts) if parts else None
    return _collect(replays, players, spec, reward_scale, reading, label, first, progress)


def asks(spec: Any, targets: str, label: str | None) -> str | None:
    """What answers at each move of the chosen players (`arena.match.runner.MatchJob.ask`): None (the
    moves alone: ``targets="moves"``, or a game with structured moves), the `label`ler, else each
    seat's own agent (``"own"``), where its strategy can be read."""
    if targets != "auto" or spec.action is not None:
        return None
    return label if label is not None else "own"


def chosen(names: Sequence[str], specs: Sequence[str], players: set[str] | None) -> set[int]:
    """The seats of a match whose league name (or agent spec) is among `players` (None: every seat)."""
    return {s for s in range(len(names)) if players is None or names[s] in players
            or (s < len(specs) and specs[s] in players)}


def from_observed(matches: Iterable[tuple[int, Sequence[float], Sequence[tuple]]], spec: Any,
                  reward_scale: float = 1.0) -> Demonstrations | None:
    """The demonstrations of observed moves, in order: for each match its index, its returns and its
    moves ``(seat, observation.raw, action[, answer or None])`` (what `arena.match.observe` kept as the
    match was played, or `arena.match.verify.observed_moves` re-simulated): the network's inputs for
    `spec`, the moves (as the action model's arrays for structured moves), the final return of the
    player who moved times `reward_scale`, and, where every move has an answer, the answers as the
    teacher's probabilities over the mask. None: no moves."""
    from arena.inference.policy_nets import policy_inputs
    from arena.inference.trees import tree_stack

    model = None
    if spec.action is not None:
        from arena.envs.actions import ActionModel

        model = ActionModel.from_dict(spec.action)
    obs, acts, outs, which, probs = [], [], [], [], []
    for index, returns, moves in matches:
        for move in moves:
            seat, raw, action = move[:3]
            obs.append(policy_inputs(raw, seat, spec))
            # a structured move as its action model's arrays; a one-part move as it is
            acts.append(action if model is None else model.to_arrays(model.check(action, raw)[0]))
            probs.append(move[3] if len(move) > 3 else None)
            outs.append(float(returns[seat]) * reward_scale)
            which.append(index)
    if not acts:
        return None
    inputs = tree_stack(obs)
    if model is not None:
        return Demonstrations(inputs, tree_stack(acts), np.asarray(outs, np.float32), np.asarray(which))
    mask = inputs.get("mask")
    soft = None
    if mask is not None and all(p is not None for p in probs):  # every move's teacher could be read
        soft = np.zeros(mask.shape, np.float32)
        for j, (legal, p) in enumerate(probs):
            soft[j, legal] = p
    return Demonstrations(inputs, np.asarray(acts), np.asarray(outs, np.float32), np.asarray(which), probs=soft)


def sc2_replay_files(game: str, folder: str | Path) -> list[Path]:
    """The ``.SC2Replay`` files ``il.sc2_replays`` names for `game`, or a one-line `ArenaError` (not a
    StarCraft II game, no such folder, no replays in it, too many)."""
    from arena.envs.sc2.replay_observer import replay_files

    if not game.startswith("sc2/"):
        raise ArenaError(f"il.sc2_replays: {game} is not a StarCraft II game: .SC2Replay files are imitated in the "
                         "sc2/<map>-v0 games")
    return replay_files(folder, "il.sc2_replays")


def sc2_replay_demonstrations(game: str, game_kwargs: dict, folder: str | Path, players: Sequence[str] | None,
                              spec: Any, reward_scale: float = 1.0, first: int = 0) -> tuple[Demonstrations | None, int]:
    """(the demonstrations of the StarCraft II replays in `folder`, how many replays were read): each
    ``.SC2Replay`` played through the game's replay observer (`arena.envs.sc2.replay_observer`) from the
    perspective of every player, or of `players` (seats ``player_1`` or player ids ``"1"``), into the
    tuples a match keeps for an observed seat, converted by `from_observed` as the run's own matches are;
    replay i is match ``first + i``. A one-line `ArenaError` for a missing folder, no replays, a replay of
    another map or game build, a game that is not StarCraft II, a missing game or the missing extra."""
    from arena.envs.registry import make_core
    from arena.envs.sc2.replay_observer import replay_moves

    files = sc2_replay_files(game, folder)
    core = make_core(game, **game_kwargs)
    try:
        ids = None
        if players:
            seats = {name: s + 1 for s, name in enumerate(core.players)}
            seats.update({str(s + 1): s + 1 for s in range(len(core.players))})
            unknown = [p for p in players if str(p) not in seats]
            if unknown:
                raise ArenaError(f"il.players: {unknown[0]!r} is no player of {game}'s replays: name seats "
                                 f"({', '.join(core.players)}) or player ids (1 to {len(core.players)})")
            ids = [seats[str(p)] for p in players]
        demos = from_observed(((first + i, returns, moves) for i, returns, moves in replay_moves(core, files, ids)),
                              spec, reward_scale)
    finally:
        core.close()
    return demos, len(files)


def _collect(replays, players, spec, reward_scale, reading, label, first, progress) -> Demonstrations | None:
    """`collect` in one process, re-simulating each replay (`arena.match.verify.observed_moves`)."""
    from arena.match.verify import observed_moves

    readers = _StrategyReaders(enabled=reading, label=label)

    def matches():
        for i, (rep, names) in enumerate(replays):
            if progress is not None and i and i % 50 == 0:
                progress(i)
            seats = chosen(names, rep.header.get("agents") or [], players)
            if not seats:
                continue
            ask = readers.for_replay(rep, seats, seed=first + i)
            yield first + i, rep.result["returns"], observed_moves(rep, seats, ask=ask)

    return from_observed(matches(), spec, reward_scale)


def _collect_share(args: tuple) -> Demonstrations | None:
    return _collect(*args, None)


def _collect_in_parallel(replays, players, spec, reward_scale, label, workers, progress=None) -> list[Demonstrations]:
    """`_collect` over `workers` forked processes, shares of the replays in order (a few per worker, so
    that progress shows), the shares with moves in order; joined, the same result as one process (the
    readers are seeded by replay)."""
    import concurrent.futures as cf
    import multiprocessing as mp
    import os

    from arena.procs import die_with

    shares = min(len(replays), 8 * workers)
    bounds = np.linspace(0, len(replays), shares + 1).astype(int)
    jobs = [(list(replays[a:b]), players, spec, reward_scale, True, label, int(a))
            for a, b in zip(bounds[:-1], bounds[1:])]
    parts = []
    with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"), initializer=die_with,
                                initargs=(os.getpid(),)) as ex:
        for part, b in zip(ex.map(_collect_share, jobs), bounds[1:]):
            parts.append(part)
            if progress is not None:
                progress(int(b))
    return [p for p in parts if p is not None]


def joined(parts: list[Demonstrations]) -> Demonstrations:
    """Demonstrations joined in order (probabilities and privileged views only where every part has them)."""
    def cat(xs: list) -> Any:
        if isinstance(xs[0], dict):
            return {k: cat([x[k] for x in xs]) for k in xs[0]}
        return np.concatenate(xs)

    def every(name: str) -> Any:
        xs = [getattr(p, name) for p in parts]
        return None if any(x is None for x in xs) else cat(xs)

    return Demonstrations(cat([p.obs for p in parts]), cat([p.actions for p in parts]),
                          cat([p.outcome for p in parts]), cat([p.match for p in parts]), every("privileged"),
                          every("probs"))


def with_mirror_images(demos: Demonstrations, perm: np.ndarray) -> Demonstrations:
    """`demos` and after them each position's mirror image (`GameCore.mirror`: the board's last axis
    reversed, each move, mask entry and probability moved to its image `perm[a]`), from the same match."""
    planes = demos.obs.get("obs")
    if planes is None or planes.ndim != 4 or set(demos.obs) - {"obs", "mask"}:
        raise ValueError("mirror images are of board planes ([N, C, H, W] inputs)")
    inv = np.argsort(perm)  # the image's entry for move b is the original's for move inv[b]
    inputs = {"obs": np.ascontiguousarray(planes[..., ::-1])}
    if "mask" in demos.obs:
        inputs["mask"] = demos.obs["mask"][:, inv]
    image = Demonstrations(inputs, perm[demos.actions], demos.outcome, demos.match, demos.privileged,
                           None if demos.probs is None else demos.probs[:, inv])
    return joined([demos, image])


def save_demonstrations(path: str | Path, demos: Demonstrations | None, indices: Sequence[int]) -> Path:
    """Write the demonstrations of the matches `indices` (None: none of their chosen players moved) to
    `path` as plain arrays (``.npz``, no pickled objects; a dict of arrays as one array a key), atomically."""
    import io

    from arena.fsio import atomic_write_bytes

    arrays: dict[str, np.ndarray] = {"indices": np.asarray(list(indices), np.int64)}
    if demos is not None:
        for name in ("obs", "actions"):
            tree = getattr(demos, name)
            if isinstance(tree, dict):
                arrays.update({f"{name}:{k}": np.asarray(v) for k, v in tree.items()})
            else:
                arrays[name] = np.asarray(tree)
        for name in ("outcome", "match", "privileged", "probs"):
            value = getattr(demos, name)
            if value is not None:
                arrays[name] = np.asarray(value)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return atomic_write_bytes(path, buf.getvalue())


def load_demonstrations(path: str | Path) -> tuple[Demonstrations | None, np.ndarray]:
    """(demonstrations or None, the match indices they cover), as `save_demonstrations` wrote them."""
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    indices = arrays.pop("indices")
    if "outcome" not in arrays:
        return None, indices

    def tree(name: str) -> Any:
        if name in arrays:
            return arrays[name]
        return {k.split(":", 1)[1]: v for k, v in arrays.items() if k.startswith(name + ":")}

    inputs = tree("obs")
    if not isinstance(inputs, dict):  # written before every input was a dict: the tensor and its mask
        inputs = {"obs": inputs, **({"mask": arrays["mask"]} if "mask" in arrays else {})}
    return Demonstrations(inputs, tree("actions"), arrays["outcome"], arrays["match"], arrays.get("privileged"),
                          arrays.get("probs")), indices


class _StrategyReaders:
    """The teachers of a set of replays, rebuilt from their specs once each, that can tell their action
    probabilities (`BaseAgent.action_probabilities`), or the one labeller that answers for every seat;
    `for_replay` gives `observed_moves` its ``ask``."""

    def __init__(self, enabled: bool, label: str | None = None):
        self.enabled, self.label = enabled, label
        self.agents: dict[tuple[str, str], Any] = {}

    def _agent(self, game: str, kwargs: dict, spec: str):
        key = (game, spec)
        if key not in self.agents:
            from arena.agents.specs import make_agent
            from arena.envs.registry import make_core

            core = make_core(game, **kwargs)
            try:
                agent = make_agent(spec, core, 0)
            except ArenaError:  # a teacher that cannot be rebuilt here (a missing checkpoint) is read by its moves
                agent = None
            finally:
                core.close()
            self.agents[key] = agent if callable(strategy_reader(agent)) else None
        return self.agents[key]

    def for_replay(self, rep: Replay, seats: set[int], seed: int = 0) -> dict[int, Any] | None:
        """seat -> (observation -> (legal actions, probabilities)), or None unless every seat's can be read;
        each reader is reset with `seed` first."""
        from arena.match.verify import replay_game_kwargs

        if not self.enabled:
            return None
        h = rep.header
        specs = h.get("agents") or []
        ask = {}
        for s in seats:
            who = self.label or (specs[s] if s < len(specs) else None)
            agent = self._agent(h["game_id"], replay_game_kwargs(rep), who) if who is not None else None
            if agent is None:
                if self.label:
                    raise ArenaError(f"il.label: {self.label} cannot tell its action probabilities in "
                                     f"{h['game_id']}: use a labeller whose strategy can be read (mcts, cfr, "
                                     "policy_mcts)")
                return None
            if callable(getattr(agent, "reset", None)):
                agent.reset(seed)
            ask[s] = lambda o, read=strategy_reader(agent): (list(o.legal_actions), read(o))
        return ask


def split(demos: Demonstrations, val_fraction: float, seed: int) -> tuple[Demonstrations, Demonstrations]:
    """Training and validation moves, split by match."""
    rng = np.random.default_rng(seed)
    ids = np.unique(demos.match)
    rng.shuffle(ids)
    n_val = max(1, int(round(len(ids) * val_fraction)))
    if len(ids) < 2:
        raise ValueError("imitation needs at least two matches (one to train on, one to validate)")
    val = np.isin(demos.match, ids[:n_val])
    return demos.take(np.nonzero(~val)[0]), demos.take(np.nonzero(val)[0])


def behaviour_cloning(net: Any, train: Demonstrations, val: Demonstrations, *, epochs: int, batch_size: int, lr: float,
                      weight_decay: float, patience: int, value_coef: float, seed: int, smoothing: float = 0.0,
                      log: Callable[[int, dict], None] | None = None) -> dict[str, Any]:
    """Train `net` in place; returns the best epoch's figures (its weights are loaded back). Accuracy is
    the share of positions where the policy's most probable move is the teacher's: its move, or the most
    probable under its probabilities where they are fitted.

    `smoothing` (label smoothing, per part): the training target is ``(1 - smoothing)`` the teacher's
    and ``smoothing`` the uniform policy over each part's legal choices along the teacher's chain, so
    the loss adds ``smoothing * KL(uniform || pi)``: a choice the teacher never makes keeps about
    ``smoothing / n_legal`` of the probability instead of none, which the RL that follows can sample
    (a head imitation leaves certain is one no policy gradient moves). The losses logged and the
    validation loss that picks the best epoch are the smoothed ones (the unsmoothed one would pick the
    sharpest epoch and undo the smoothing)."""
    import torch

    from arena.inference.distributions import uniform_like

    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    tt = torch.from_numpy

    from arena.inference.trees import tree_leaf, tree_map, tree_torch

    def tensors(d: Demonstrations):
        acts = tree_torch(d.actions) if isinstance(d.actions, dict) else tt(d.actions).long()
        return tree_torch(d.obs), acts, tt(d.outcome)

    X, A, Z = tensors(train)
    Xv, Av, Zv = tensors(val)
    # the teacher's action probabilities where its strategy could be read (for both sets, or for neither)
    P, Pv = (None, None) if train.probs is None or val.probs is None else (tt(train.probs), tt(val.probs))
    n_train, n_val = len(tree_leaf(A)), len(tree_leaf(Av))

    def rows(tree, j):
        return tree_map(lambda t: t[j], tree)

    def hits(dist, actions) -> int:
        """Moves the policy's most probable choice matches (every part the move uses)."""
        if not isinstance(actions, dict):
            return int((dist.mode() == actions).sum())
        mode = dist.mode()
        model = net.model
        kind = actions[model.parts[0].name].long() if model.uses is not None else None
        ok = None
        for i, p in enumerate(model.parts):
            same = (mode[p.name] == actions[p.name]).reshape(len(mode[p.name]), -1).all(-1)
            if kind is not None:
                same = same | (net.uses[kind, i] == 0)
            ok = same if ok is None else ok & same
        return int(ok.sum())

    def fitted(dist, actions, probs):
        """Each position's loss: the teacher's moves' (or probabilities') negative log-likelihood, and
        with `smoothing` that share of the uniform policy's instead (``log_prob`` has conditioned a
        structured move on the teacher's chain, so the uniform policy is each part's along it)."""
        nll = -dist.log_prob(actions) if probs is None else _soft_nll(dist, probs)
        return nll if smoothing <= 0 else (1 - smoothing) * nll + smoothing * uniform_like(dist).kl(dist)

    def evaluate() -> tuple[float, float]:
        net.eval()
        with torch.no_grad():
            losses, correct = [], 0
            for i in range(0, n_val, 4096):
                j = slice(i, i + 4096)
                dist, value = net(rows(Xv, j))
                a = rows(Av, j)
                losses.append(float(fitted(dist, a, None if Pv is None else Pv[j]).sum()))
                correct += hits(dist, a if Pv is None else Pv[j].argmax(-1))
        return sum(losses) / n_val, correct / n_val

    best = {"epoch": -1, "val_loss": float("inf")}
    best_state = copy.deepcopy(net.state_dict())
    stale = 0
    for epoch in range(epochs):
        net.train()
        perm = torch.randperm(n_train, generator=g)
        tot, correct = 0.0, 0
        for i in range(0, n_train, batch_size):
            j = perm[i:i + batch_size]
            dist, value = net(rows(X, j))
            a = rows(A, j)
            nll = fitted(dist, a, None if P is None else P[j])
            loss = nll.mean() + value_coef * 0.5 * ((value - Z[j]) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            tot += float(nll.detach().sum())
            with torch.no_grad():
                correct += hits(dist, a if P is None else P[j].argmax(-1))
        vloss, vacc = evaluate()
        line = {"il/epoch": epoch + 1, "il/train_loss": tot / n_train, "il/train_acc": correct / n_train,
                "il/val_loss": vloss, "il/val_acc": vacc}
        if log is not None:
            log(epoch + 1, line)
        if vloss < best["val_loss"] - 1e-4:
            best = {"epoch": epoch + 1, "val_loss": vloss, "val_acc": vacc, "train_loss": tot / n_train,
                    "train_acc": correct / n_train}
            best_state = copy.deepcopy(net.state_dict())
            stale = 0
        else:
            stale += 1
            if stale >= patience:
                break
    net.load_state_dict(best_state)
    net.eval()
    best["epochs_run"] = epoch + 1
    best["train_moves"], best["val_moves"] = n_train, n_val
    return best


def _soft_nll(dist: Any, probs: Any) -> Any:
    """Cross-entropy of the policy against the teacher's action probabilities, a value a position: the
    moves' negative log-likelihood in expectation over the teacher's strategy (its minimum, the
    teacher's entropy, is reached by the teacher's probabilities exactly)."""
    import torch

    return -torch.where(probs > 0, probs * dist.log_probs, torch.zeros_like(probs)).sum(-1)

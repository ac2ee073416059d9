"""One distribution protocol for every part of a move, and their autoregressive composite.

Every distribution here, and the continuous ones (`arena.inference.continuous.Gaussian` and
`Beta`), answers the same five calls over a batch ``[B]``: ``sample(generator)``, ``mode()``,
``log_prob(actions) -> [B]``, ``entropy() -> [B]`` and ``kl(other) -> [B]`` (``KL(self || other)``);
those with a finite set of choices also ``uniform()``, their uniform counterpart over the same legal
choices (`uniform_like`: a uniform magnet). So the learners' losses (PPO's ratio, V-trace's importance
weights, UPGO, the entropy bonus, the KL to the imitation policy or a magnet) are written once.

* `MaskedCategorical`: a **categorical** part (an action type, a discrete game's move), a
  **pointer** (one entity slot) and a **spatial** part (one cell of a grid, flattened); an illegal
  choice has probability exactly 0;
* `SelectDist` is the **multi-select pointer** (AlphaStar's selected units): up to ``S`` steps,
  each a categorical over the ``N`` entity slots and an end-of-selection choice, each step masked
  by the game and by the slots already chosen; the action is the ``S`` slots padded with -1;
* `Composite` is a whole move: the parts in the order a policy chooses them, each conditioned on
  the parts chosen before it (its mask and the network's autoregressive embedding depend on them).

A composite is *conditioned on one chain of choices*: sampling builds each part's distribution
from the choices before it; ``log_prob(actions)`` rebuilds them from the given choices (teacher
forcing), and ``entropy()`` and ``kl(other)`` are then those of the parts along that chain,
summed, with ``other`` conditioned on the same chain. The entropy is therefore the chain's
(AlphaStar's estimate): exact for the first part, a one-sample estimate of the later parts'
conditional entropies. A part that the chosen action type does not use is multiplied by 0:
it contributes nothing to the log-probability, the entropy or the KL.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["Composite", "MaskedCategorical", "SelectDist", "normalized_entropy", "select_active", "select_choices",
           "uniform_like"]

# torch is imported where it is used: `arena.inference.policy_nets` imports this module, and importing
# that needs no torch.
Tensor = Any


class MaskedCategorical:
    """A categorical over the legal actions only: masked logits are the dtype's most negative value,
    so an illegal action has probability exactly 0 and is never sampled or chosen greedily. A row
    with no legal action is uniform (no NaN)."""

    def __init__(self, logits: Any, mask: Any | None = None):
        import torch

        if mask is not None:
            logits = logits.masked_fill(~mask.bool(), torch.finfo(logits.dtype).min)
        self.logits = logits
        self.log_probs = torch.log_softmax(logits, dim=-1)
        self.mask = mask

    @property
    def probs(self):
        return self.log_probs.exp()

    def sample(self, generator: Any = None):
        import torch

        return torch.multinomial(self.probs, 1, generator=generator).squeeze(-1)

    def mode(self):
        return self.logits.argmax(-1)

    def log_prob(self, actions):
        return self.log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self):
        p = self.probs
        # 0 * log 0 = 0 for the masked actions (their log-prob is huge and negative, not -inf)
        return -(p * self.log_probs).where(p > 0, p.new_zeros(())).sum(-1)

    def normalized_entropy(self, by: str = "legal"):
        """The entropy divided by the log of the number of choices (AlphaStar's normalisation, so parts
        of different sizes weigh alike): the legal ones (``by="legal"``) or all the head's
        (``by="head"``, the pseudocode's ``log(logits.shape[-1])``); 0 where there is one choice."""
        import torch

        h = self.entropy()
        if by == "legal" and self.mask is not None:
            k = self.mask.bool().sum(-1).to(h.dtype)
        else:
            k = torch.full_like(h, float(self.logits.shape[-1]))
        return torch.where(k > 1, h / torch.log(k.clamp(min=2.0)), torch.zeros_like(h))

    def kl(self, other: "MaskedCategorical"):
        p = self.probs
        return (p * (self.log_probs - other.log_probs)).where(p > 0, p.new_zeros(())).sum(-1)

    def uniform(self) -> "MaskedCategorical":
        """The uniform distribution over the same legal actions (a uniform magnet's)."""
        import torch

        return MaskedCategorical(torch.zeros_like(self.logits), self.mask)


def select_active(actions: Tensor) -> Tensor:
    """``[B, S]`` bool: the steps a selection of padded slots ``actions [B, S]`` made (each chosen slot,
    and the end-of-selection step after the last one unless all ``S`` were chosen)."""
    import torch

    chosen = actions >= 0
    before = torch.cumprod(chosen.long(), dim=-1)  # 1 while every step so far chose a slot
    active = torch.ones_like(chosen)
    active[:, 1:] = before[:, :-1].bool()
    return active


def select_choices(actions: Tensor, n: int) -> Tensor:
    """The step choices of a selection: the slot, or ``n`` (end of selection) where it is padded."""
    import torch

    return torch.where(actions >= 0, actions, torch.full_like(actions, n))


class SelectDist:
    """An ordered choice of 1 to S entity slots; see the module docstring. ``steps`` is a
    `MaskedCategorical` over ``[B, S, N + 1]`` (the slots, then end), conditioned on one chain."""

    def __init__(self, steps: MaskedCategorical, active: Tensor, n: int):
        self.steps, self.active, self.n = steps, active, n

    def log_prob(self, actions: Tensor) -> Tensor:
        lp = self.steps.log_prob(select_choices(actions.long(), self.n))
        return lp.where(self.active, lp.new_zeros(())).sum(-1)

    def entropy(self) -> Tensor:
        h = self.steps.entropy()
        return h.where(self.active, h.new_zeros(())).sum(-1)

    def normalized_entropy(self, by: str = "legal") -> Tensor:
        h = self.steps.normalized_entropy(by)
        return h.where(self.active, h.new_zeros(())).sum(-1)

    def kl(self, other: "SelectDist") -> Tensor:
        k = self.steps.kl(other.steps)
        return k.where(self.active, k.new_zeros(())).sum(-1)

    def uniform(self) -> "SelectDist":
        return SelectDist(self.steps.uniform(), self.active, self.n)


#: What a network's chain returns: the actions of every part ``{name: [B, ...]}``, each part's
#: distribution given the choices before it, and whether the move uses it (``{name: [B] float}``).
Chain = Callable[[dict | None, Any, bool], tuple[dict, dict, dict]]


class Composite:
    """A whole move's distribution; see the module docstring. `chain(actions, generator, greedy)` runs
    the network's heads in order: with `actions` given it conditions every part on them, else it
    draws each part (the most probable one when `greedy`) and conditions the next on it."""

    def __init__(self, chain: Chain, names: list[str]):
        self._chain, self.names = chain, names
        self.actions: dict | None = None
        self.parts: dict = {}
        self.used: dict = {}

    def _run(self, actions: dict | None, generator: Any = None, greedy: bool = False) -> dict:
        self.actions, self.parts, self.used = self._chain(actions, generator, greedy)
        return self.actions

    def sample(self, generator: Any = None) -> dict:
        import torch

        with torch.no_grad():
            return self._run(None, generator)

    def mode(self) -> dict:
        import torch

        with torch.no_grad():
            return self._run(None, None, True)

    def sample_given(self, first: dict, generator: Any = None) -> dict:
        """A move whose parts in `first` are those given and whose other parts are drawn, each
        conditioned on the choices before it (an explorer that picks the first part itself)."""
        import torch

        with torch.no_grad():
            return self._run(first, generator)

    def condition(self, actions: dict) -> "Composite":
        """Rebuild the parts along the chain `actions` (no-op when already conditioned on them)."""
        if actions is not self.actions:
            self._run(actions)
        return self

    def _sum(self, per_part: Callable[[str], Tensor]) -> Tensor:
        import torch

        total = None
        for name in self.names:
            # an unused part is left out, not multiplied by 0: its value may be -inf (a padded or
            # unread choice the part's mask forbids), and -inf * 0 is NaN
            v = per_part(name)
            v = torch.where(self.used[name] > 0, v, torch.zeros((), dtype=v.dtype, device=v.device))
            total = v if total is None else total + v
        return total

    def log_prob(self, actions: dict) -> Tensor:
        self.condition(actions)
        return self._sum(lambda n: self.parts[n].log_prob(actions[n]))

    def entropy(self) -> Tensor:
        self._need_chain("entropy")
        return self._sum(lambda n: self.parts[n].entropy())

    def normalized_entropy(self, by: str = "legal") -> Tensor:
        """Each part's entropy normalised by its number of choices (`MaskedCategorical.normalized_entropy`;
        a continuous part's as it is), summed over the parts the move uses."""
        self._need_chain("entropy")
        return self._sum(lambda n: normalized_entropy(self.parts[n], by))

    def kl(self, other: "Composite") -> Tensor:
        self._need_chain("kl")
        other.condition(self.actions)
        return self._sum(lambda n: self.parts[n].kl(other.parts[n]))

    def uniform(self) -> "Composite":
        """The uniform policy over each part's legal choices along this chain (each part's mask given
        the choices before it): a composite conditioned on the same moves, whose parts are uniform."""
        self._need_chain("uniform")
        u = Composite(self._chain, self.names)
        u.actions, u.used = self.actions, self.used
        u.parts = {n: uniform_like(p) for n, p in self.parts.items()}
        return u

    def _need_chain(self, what: str) -> None:
        if self.actions is None:
            raise RuntimeError(f"{what}() of a composite move needs a chain of choices: call sample(), mode() "
                               "or log_prob(actions) first")


def normalized_entropy(dist: Any, by: str | None) -> Tensor:
    """`dist`'s entropy, normalised by its number of choices where it has a finite set of them (`by`:
    ``"legal"`` or ``"head"``; None: not normalised). A continuous distribution's is its own."""
    fn = getattr(dist, "normalized_entropy", None)
    return dist.entropy() if by is None or fn is None else fn(by)


def uniform_like(dist: Any) -> Any:
    """The uniform counterpart of `dist` over the same legal choices (`MaskedCategorical`, `SelectDist`,
    `Composite`); a ValueError for a distribution over a box (it has no uniform policy to pull towards)."""
    fn = getattr(dist, "uniform", None)
    if fn is None:
        raise ValueError(f"magnet.kind uniform needs moves with a finite set of choices; a {type(dist).__name__} "
                         "draws from a box (use magnet.kind imitation or copy)")
    return fn()

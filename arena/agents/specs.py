"""Agents from spec strings, the same on the CLI and in YAML.

Forms:
* ``random``, ``first``, ``human``, ``constant:value=0.05`` (continuous actions)
* ``mcts:simulations=200,rollouts=1``, ``tactics:epsilon=0.1``, ``cfr:iterations=200``
* ``package.module:ClassName`` or ``package.module:ClassName:key=value,...`` for your own agents
* kinds with a positional argument before their options (``tabular:<table.json>``,
  ``llm:<model folder>``, ``policy:<checkpoint>``, ``policy_mcts:<checkpoint>`` (search with the
  policy's priors and value), ``rllib:<checkpoint>``, ``skirmish:<bot>``: the
  Skirmish game's scripted players; ``sc2:<script>``), ``sc2bot:difficulty=hard,race=zerg`` (StarCraft II's
  built-in AI in a seat), and your own kinds
  registered with `register_agent_kind`.

The built-in kinds' options are checked against `OPTION_RULES` (type and range) when a spec is
parsed, by `check_spec` (a league config is validated with it before its league is created) and by
`make_agent`: ``mcts:simulations=-5`` is one line naming the option and its valid range, not a
match forfeited at its first move.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any, Callable

from arena.envs.core import GameCore
from arena.errors import AgentSpecError, ArenaError, IncompatibleAgent, shown
from arena.usercode import import_user_module, user_module_exists

#: kind -> factory(core, seed, positional, **options)
_KINDS: dict[str, Callable[..., Any]] = {}


def register_agent_kind(name: str, factory: Callable[..., Any]) -> None:
    if name in _KINDS:
        raise AgentSpecError(f"agent kind {name!r} is already registered")
    _KINDS[name] = factory


def agent_kinds() -> list[str]:
    return sorted(_KINDS)


#: Kinds whose player is the game itself (StarCraft II's built-in AI, ``sc2bot``): a match seats at
#: most one, so a league never pairs two of them.
GAME_PLAYED_KINDS = frozenset({"sc2bot"})


def played_by_game(spec: str) -> bool:
    """Whether `spec` is a seat the game plays itself (`GAME_PLAYED_KINDS`)."""
    return isinstance(spec, str) and spec.strip().partition(":")[0] in GAME_PLAYED_KINDS


def _value(s: str) -> Any:
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError):
        return s


def parse_options(text: str, spec: str) -> tuple[str | None, dict[str, Any]]:
    """``"a=1,b=x"`` -> options; a first item without ``=`` is the positional argument."""
    positional, opts = None, {}
    if not text:
        return positional, opts
    for i, item in enumerate(text.split(",")):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            if i == 0:
                positional = item
                continue
            raise AgentSpecError(f"agent spec {shown(spec)}: option {shown(item)} should be key=value")
        k, _, v = item.partition("=")
        opts[k.strip()] = _value(v.strip())
    return positional, opts


def _int_at_least(lo: int):
    return (f"an integer >= {lo}", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= lo)


def _int_in(lo: int, hi: int):
    """An integer in ``[lo, hi]``; the message names the bound a value breaks (both for a non-integer)."""
    def what(v: Any = None) -> str:
        below = isinstance(v, int) and not isinstance(v, bool) and v < lo
        return f"an integer >= {lo}" if below else f"an integer >= {lo} and at most {hi:,}"
    return what, lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _bool():
    # an option's value is read as a Python literal: ``greedy=True`` is a bool, ``greedy=true`` the text
    return "true or false", lambda v: isinstance(v, bool) or (isinstance(v, str) and v.lower() in ("true", "false"))


def _number_in(lo: float, hi: float | None, lo_open: bool = False):
    what = f"a number in {'(' if lo_open else '['}{lo:g}, {hi:g}]" if hi is not None else f"a number > {lo:g}"

    def ok(v) -> bool:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return False
        return (v > lo if lo_open or hi is None else v >= lo) and (hi is None or v <= hi)
    return what, ok


#: Upper bounds of the built-in agents' options: a config is data, and one option must not be able to
#: block start-up (``cfr:iterations=1e9`` solves the game at start for ever) or a match (a search of a
#: billion simulations a move). Each is far above what this project uses: CFR+ runs 40 to 300 iterations
#: in the shipped configs (Leduc, 300: about 100 s on 2 cores; 10,000: about an hour); MCTS labels with
#: up to 3,000 simulations (C++: 2.4 ms per 400 on Connect Four, so 100,000 is under a second a move;
#: Python's about 20 times slower); a rollout count of 100 is 100 random games per leaf.
MAX_CFR_ITERATIONS = 10_000
MAX_SIMULATIONS = 100_000
#: policy_mcts's ``explore``: opening moves drawn from the search's visits.
MAX_EXPLORE_MOVES = 1_000
MAX_ROLLOUTS = 100
MAX_UCT_C = 1_000.0
#: Torch threads an agent may ask for (``policy:...,threads=N``), retries a person gets at the terminal.
MAX_THREADS = 256
MAX_TRIES = 1_000
MAX_SEED = 2 ** 63 - 1
_SEED = _int_in(0, MAX_SEED)


def _number_above(lo: float, hi: float):
    """A finite number > `lo` and at most `hi`; the message names the bound a value breaks."""
    _, ok = _number_in(lo, hi, lo_open=True)

    def what(v: Any = None) -> str:
        below = isinstance(v, (int, float)) and not isinstance(v, bool) and v <= lo
        return f"a number > {lo:g}" if below else f"a number > {lo:g} and at most {hi:g}"
    return what, ok


#: Option rules of the built-in kinds: option -> (what it must be: a text, or a function of the value
#: giving one; check). A kind listed here takes no other option; kinds not listed (tabular, llm, rllib,
#: your own) check their options themselves. The kinds of `POSITIONAL_KINDS` take a positional argument
#: (a checkpoint) before their options.
OPTION_RULES: dict[str, dict[str, tuple[Any, Callable[[Any], bool]]]] = {
    "random": {},
    "first": {},
    "trader": {},
    "human": {"max_tries": _int_in(1, MAX_TRIES)},
    "mcts": {"simulations": _int_in(1, MAX_SIMULATIONS), "rollouts": _int_in(1, MAX_ROLLOUTS),
             "uct_c": _number_above(0, MAX_UCT_C),
             "backend": ("python or cpp", lambda v: v in ("python", "cpp")), "epsilon": _number_in(0, 1)},
    "tactics": {"epsilon": _number_in(0, 1)},
    "cfr": {"iterations": _int_in(1, MAX_CFR_ITERATIONS)},
    # (the policy's own factory says more of a temperature: > 0, and only for discrete moves)
    "policy": {"greedy": _bool(), "temperature": _number_in(-1e9, 1e9), "threads": _int_in(1, MAX_THREADS)},
    "policy_mcts": {"simulations": _int_in(2, MAX_SIMULATIONS), "uct_c": _number_above(0, MAX_UCT_C),
                    "explore": _int_in(0, MAX_EXPLORE_MOVES), "threads": _int_in(1, MAX_THREADS)},
}
#: Kinds of `OPTION_RULES` whose spec starts with a positional argument (``policy:runs/c4/best,greedy=true``).
POSITIONAL_KINDS = frozenset({"policy", "policy_mcts"})


def _check_options(kind: str, opts: dict[str, Any], spec: str) -> None:
    rules = OPTION_RULES.get(kind)
    if rules is None:
        return
    rules = {**rules, "seed": _SEED}  # every kind takes seed= (make_agent seeds the agent with it)
    for name, value in opts.items():
        if name not in rules:
            takes = f"{kind} takes {', '.join(rules)}"
            raise AgentSpecError(f"agent spec {shown(spec)}: unknown option {shown(name)} ({takes})")
        what, ok = rules[name]
        if not ok(value):
            what = what(value) if callable(what) else what
            raise AgentSpecError(f"agent spec {shown(spec)}: bad option value: {name} must be {what}, got {shown(value)}")


def _split_spec(spec: Any) -> tuple[str, str, str]:
    """(the spec stripped, its kind, the rest after the first ``:``); AgentSpecError unless a non-empty string."""
    if not isinstance(spec, str) or not spec.strip():
        raise AgentSpecError(f"agent spec must be a non-empty string, got {shown(spec)}")
    spec = spec.strip()
    kind, _, rest = spec.partition(":")
    return spec, kind, rest


def check_spec(spec: Any) -> None:
    """Check a spec without building its agent (no game, no files, no imports): a string, a known kind
    (or ``module:Class``), and a built-in kind's options by `OPTION_RULES`. AgentSpecError names what is
    wrong; what only building can tell (a missing weights file, a game the agent cannot play) is left
    to `make_agent`."""
    spec, kind, rest = _split_spec(spec)
    if kind in _KINDS:
        positional, opts = parse_options(rest, spec)
        if kind in OPTION_RULES and kind not in POSITIONAL_KINDS and positional is not None:
            raise AgentSpecError(f"agent kind {shown(kind)} takes only key=value options, got {shown(positional)}")
        _check_options(kind, opts, spec)
    elif not rest:
        raise AgentSpecError(f"unknown agent kind {shown(spec)}{_did_you_mean(spec)}; known kinds: "
                             f"{', '.join(agent_kinds())}, or module:Class")
    elif "." not in kind and not _importable(kind):
        raise _unknown_kind(kind, spec, rest)


def _unknown_kind(kind: str, spec: str, rest: str) -> AgentSpecError:
    """The error for ``kind:rest`` where `kind` is neither a built-in kind nor a module that can be
    imported: a module's name where the rest reads as a class (``my_agent:MyAgent``), else a kind's."""
    target = rest.split(":", 1)[0]
    if target.isidentifier() and target[:1].isupper() and not _did_you_mean(kind):
        return AgentSpecError(f"no module {shown(kind)} for {shown(spec)}: a module:Class agent's module must be "
                              f"installed or be {kind}.py in the working folder (or give its file with --plugin); "
                              f"built-in kinds: {', '.join(agent_kinds())}")
    return AgentSpecError(f"unknown agent kind {shown(kind)} in {shown(spec)}{_did_you_mean(kind)}; known kinds: "
                          f"{', '.join(agent_kinds())}, or module:Class")


def _importable(module: str) -> bool:
    try:
        return user_module_exists(module)
    except (ImportError, ValueError):
        return False


def make_agent(spec: str, core: GameCore | None = None, seed: int | None = None) -> Any:
    """Build an agent from its spec string for the given game core."""
    spec, kind, rest = _split_spec(spec)
    if kind in _KINDS:
        positional, opts = parse_options(rest, spec)
        _check_options(kind, opts, spec)
        if "seed" in opts:  # seeds the agent as it is built (the match loop reseeds it for each match)
            seed = opts.pop("seed")
            if not isinstance(seed, int) or isinstance(seed, bool):
                raise AgentSpecError(f"agent spec {shown(spec)}: seed must be an integer, got {shown(seed)}")
        try:
            agent = _KINDS[kind](core, seed, positional, **opts)
        except ArenaError:
            raise
        except Exception as e:
            raise _spec_error(spec, e) from e
    elif rest:
        cls_name, _, opt_text = rest.partition(":")
        try:
            module = import_user_module(kind)
        except ImportError as e:
            if "." not in kind:
                raise _unknown_kind(kind, spec, rest) from None
            raise AgentSpecError(
                f"unknown agent spec {shown(spec)}: {shown(kind)} is neither an agent kind ({', '.join(agent_kinds())}) "
                f"nor an importable module ({e})"
            ) from None
        cls = getattr(module, cls_name, None)
        if cls is None:
            raise AgentSpecError(f"agent spec {shown(spec)}: module {shown(kind)} has no attribute {shown(cls_name)}")
        _, opts = parse_options(opt_text, spec)
        try:
            agent = cls(**opts)
        except ArenaError:
            raise
        except Exception as e:
            raise _spec_error(spec, e) from e
    else:
        raise AgentSpecError(f"unknown agent kind {shown(spec)}{_did_you_mean(spec)}; known kinds: "
                             f"{', '.join(agent_kinds())}, or module:Class")
    if not callable(getattr(agent, "act", None)):
        raise AgentSpecError(f"agent spec {shown(spec)} built {type(agent).__name__}, which has no act(observation) method")
    try:
        agent.spec = spec
    except AttributeError:
        pass
    return agent


def _did_you_mean(kind: str) -> str:
    import difflib

    close = difflib.get_close_matches(kind, agent_kinds(), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _spec_error(spec: str, e: BaseException) -> AgentSpecError:
    """One line that says what is wrong with `spec` (the error an agent's constructor raised)."""
    text = str(e)
    m = re.search(r"unexpected keyword argument '(\w+)'", text)
    if isinstance(e, TypeError) and m:
        return AgentSpecError(f"agent spec {shown(spec)}: unknown option {m.group(1)!r}")
    if isinstance(e, FileNotFoundError):
        return AgentSpecError(f"agent spec {shown(spec)}: {text}")
    if isinstance(e, (TypeError, ValueError)):
        return AgentSpecError(f"agent spec {shown(spec)}: bad option value ({text})")
    return AgentSpecError(f"agent spec {shown(spec)}: {type(e).__name__}: {text}")


def _no_positional(kind: str, positional: str | None) -> None:
    if positional is not None:
        raise AgentSpecError(f"agent kind {shown(kind)} takes only key=value options, got {shown(positional)}")


def _random(core, seed, positional, **opts):
    from arena.agents.basic import RandomAgent

    _no_positional("random", positional)
    return RandomAgent(seed=opts.pop("seed", seed), **opts)


def _first(core, seed, positional, **opts):
    from arena.agents.basic import FirstLegalAgent

    _no_positional("first", positional)
    if core is not None and core.action_kind == "continuous":
        # a continuous action space lists no legal moves: the agent would forfeit every episode
        raise IncompatibleAgent(f"the first agent plays the first legal move; {core.game_id} has continuous actions")
    if core is not None and not core.lists_legal_moves:
        raise IncompatibleAgent(f"the first agent plays the first legal move; {core.game_id}'s moves are free text")
    return FirstLegalAgent(**opts)


def _trader(core, seed, positional, **opts):
    from arena.agents.basic import TRADER_GAMES, TraderAgent

    _no_positional("trader", positional)
    opts.pop("seed", None)  # deterministic: nothing to seed
    if core is not None and core.game_id not in TRADER_GAMES:
        raise IncompatibleAgent(f"the trader reads the negotiation view of {', '.join(TRADER_GAMES)}; "
                                f"{core.game_id} is another game")
    return TraderAgent()


def _constant(core, seed, positional, **opts):
    from arena.agents.basic import ConstantAgent

    _no_positional("constant", positional)
    if core is not None and core.action_kind != "continuous":
        raise IncompatibleAgent(f"the constant agent plays one continuous action; {core.game_id} has "
                                f"{core.action_kind} actions")
    if core is None:
        raise AgentSpecError("the constant agent needs the game (its action box) to be built")
    unknown = set(opts) - {"value"}
    if unknown:
        raise AgentSpecError(f"constant: unknown option {sorted(unknown)[0]!r} (it takes value=)")
    try:
        return ConstantAgent(core.action_space(0), opts.get("value", 0.0))
    except ValueError as e:
        raise AgentSpecError(f"constant: {e}") from None


def _human(core, seed, positional, **opts):
    from arena.agents.human import HumanAgent

    _no_positional("human", positional)
    return HumanAgent(**opts)


def _mcts(core, seed, positional, **opts):
    from arena.agents.search import MCTSAgent

    _no_positional("mcts", positional)
    return MCTSAgent(core, seed=seed, **opts)


def _tactics(core, seed, positional, **opts):
    from arena.agents.search import TacticsAgent

    _no_positional("tactics", positional)
    return TacticsAgent(core, seed=seed, **opts)


def _cfr(core, seed, positional, **opts):
    from arena.agents.search import CFRAgent

    _no_positional("cfr", positional)
    return CFRAgent(core, seed=seed, **opts)


def _tabular(core, seed, positional, **opts):
    from arena.agents.tabular import _factory

    return _factory(core, seed, positional, **opts)


def _llm(core, seed, positional, **opts):
    from arena.agents.llm import _factory

    return _factory(core, seed, positional, **opts)


def _policy(core, seed, positional, **opts):
    from arena.agents.neural import _factory

    return _factory(core, seed, positional, **opts)


def _policy_mcts(core, seed, positional, **opts):
    from arena.agents.policy_search import _factory

    return _factory(core, seed, positional, **opts)


def _skirmish(core, seed, positional, **opts):
    from arena.agents.skirmish import _factory

    return _factory(core, seed, positional, **opts)


def _sc2bot(core, seed, positional, **opts):
    from arena.agents.sc2bot import bot_factory

    return bot_factory(core, seed, positional, **opts)


def _sc2(core, seed, positional, **opts):
    from arena.agents.sc2bot import script_factory

    return script_factory(core, seed, positional, **opts)


def _rllib(core, seed, positional, **opts):
    from arena.agents.rllib_agent import _factory

    return _factory(core, seed, positional, **opts)


for _name, _factory in {"random": _random, "first": _first, "trader": _trader, "constant": _constant, "human": _human, "mcts": _mcts, "tactics": _tactics,
                        "cfr": _cfr, "tabular": _tabular, "llm": _llm, "policy": _policy, "policy_mcts": _policy_mcts,
                        "rllib": _rllib, "skirmish": _skirmish, "sc2bot": _sc2bot, "sc2": _sc2}.items():
    register_agent_kind(_name, _factory)

#: What `arena agents list` says of each built-in kind: (an example spec, one line). The full table is
#: docs/agents.md.
KIND_SUMMARIES: dict[str, tuple[str, str]] = {
    "random": ("random", "uniform over the legal moves"),
    "first": ("first", "always the first legal move"),
    "constant": ("constant:value=0.05", "the same continuous action every move"),
    "human": ("human", "you at the terminal"),
    "mcts": ("mcts:simulations=200", "OpenSpiel's MCTS with random rollouts (backend=cpp: its C++ search)"),
    "policy_mcts": ("policy_mcts:runs/c4/best", "search with a trained policy's priors and value (PUCT)"),
    "tactics": ("tactics", "take a win, else block one, else random"),
    "cfr": ("cfr:iterations=200", "a CFR+ average policy (Kuhn, Leduc)"),
    "trader": ("trader", "the negotiation reference player"),
    "tabular": ("tabular:weights.json", "the tabular learner's policy"),
    "llm": ("llm:models/tiny", "a causal language model from a local folder"),
    "policy": ("policy:runs/c4/best", "a trained neural policy (a checkpoint folder)"),
    "rllib": ("rllib:runs/rl/checkpoint", "an RLlib PPO checkpoint"),
    "skirmish": ("skirmish:focus_fire", "the Skirmish game's scripted players"),
    "sc2bot": ("sc2bot:difficulty=hard", "StarCraft II's built-in AI in a seat"),
    "sc2": ("sc2:attack", "scripted StarCraft II raw players"),
}


def describe_agents() -> list[dict]:
    """Every registered agent kind (built-in and plug-in): its name, an example spec, its options and a
    line of what it is."""
    rows = []
    for kind in agent_kinds():
        example, line = KIND_SUMMARIES.get(kind, (kind, ""))
        if kind not in KIND_SUMMARIES:
            doc = (getattr(_KINDS[kind], "__doc__", None) or "").strip().splitlines()
            line = doc[0] if doc else "a plug-in kind"
        rows.append({"kind": kind, "example": example, "options": sorted(OPTION_RULES.get(kind, {})),
                     "about": line})
    return rows

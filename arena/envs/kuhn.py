"""Kuhn Poker with real stakes: TextArena's game with its pot accounting fixed.

Spec
----
* Id: ``arena/KuhnPoker-v2``: TextArena's ``KuhnPoker-v0-short-train`` (ante 1, 5 rounds, the
  same prompt, messages and observation wrappers as ``arena/KuhnPoker-v1``) played by
  `KuhnPokerStakesEnv`.
* Players: two. Each round both ante 1 chip and get one card of J < Q < K; the first to act
  alternates between rounds (player 1 starts round 1).
* Actions: ``[check]`` or ``[bet]`` with no bet on the table, ``[call]`` or ``[fold]`` facing a
  bet, exactly as in v1.
* Stakes (Kuhn's): a bet and a call each put 1 chip in the pot, so a round changes a player's
  chips by +-1 (check-check showdown; a fold after a bet: the folder loses its ante) or +-2
  (bet-call showdown), the payoffs of OpenSpiel's ``kuhn_poker``. ``game_state["player_chips"]``
  is each player's net over the rounds played.
* Returns: the chips each player won over the rounds (``player_chips`` at the end: they sum to 0);
  the game is rated by them (``scoring: payoff``). The winner TextArena names is still the player
  with more chips (equal chips, possible here and never in 5 rounds of v1, are a draw).

Version history
---------------
* v1: TextArena 0.7.4's Kuhn Poker as it is, SPIRAL's exact setting (SPIRAL's published results
  are on it). TextArena sets the pot to the two antes each round and never adds a bet or a call
  to it: after bet-call the winner still takes 2 chips, as after check-check, so every round is
  worth +-1 whatever was bet.
* v2: real stakes (this module). The text interface and the number of rounds are v1's. Its
  returns were v1's (+-1 to the player ahead) until 2026-12; since then they are the chips won, so a
  v2 replay recorded before then re-simulates to other returns.
"""

from __future__ import annotations

import re

from textarena.envs.KuhnPoker.env import KuhnPokerEnv

# TextArena's own pattern (envs/KuhnPoker/env.py): a move counts exactly when TextArena plays it.
_MOVE = re.compile(r"\[(Check|Bet|Fold|Call)\]", re.IGNORECASE)


class KuhnPokerStakesEnv(KuhnPokerEnv):
    """TextArena's `KuhnPokerEnv` in which a bet and a call cost the player 1 chip into the pot."""

    def step(self, action: str):
        gs = self.state.game_state
        match = _MOVE.search(action.strip())
        move = match.group(1).lower() if match else None
        if move in ("bet", "call") and move in gs["current_legal_action_tree"]:
            # Into the pot before TextArena plays the move: a call ends the round and pays the pot out
            # within the same step.
            gs["pot"] += self.ante
            gs["player_chips"][self.state.current_player_id] -= self.ante
        return super().step(action)

    def _init_round(self):
        super()._init_round()
        if self.state.done:
            # After the last round TextArena still deals one more hand and takes its antes; give them
            # back so that player_chips is each player's net winnings at the end.
            for p in (0, 1):
                self.state.game_state["player_chips"][p] += self.ante
            # The returns are the chips each player won over the rounds (TextArena's: +-1 to the one
            # with more chips): the game is rated by them (scoring "payoff").
            chips = self.state.game_state["player_chips"]
            if self.state.rewards is not None:
                self.state.rewards = {p: float(chips[p]) for p in (0, 1)}


_FREE_BET_GAME = None


def free_bet_kuhn_game():
    """``arena/KuhnPoker-v1``'s hand as an OpenSpiel game, for the CFR agent and NashConv: Kuhn Poker in
    which a bet and a call cost nothing (TextArena's v1 pot is the two antes whatever is bet), so every
    hand pays +-1: the player who folds loses its ante, else the higher card takes it. OpenSpiel's
    Python ``kuhn_poker`` with those returns, registered once as ``arena_kuhn_poker_free_bets``;
    information-state strings are that game's (``p0 card:2 pb``). Its equilibrium is not Kuhn's:
    betting has no cost, so a player never folds and always bets (CFR+ finds it)."""
    global _FREE_BET_GAME
    if _FREE_BET_GAME is None:
        import pyspiel
        from open_spiel.python.games import kuhn_poker as py_kuhn

        class FreeBetState(py_kuhn.KuhnPokerState):
            def returns(self):
                if not self._game_over:
                    return [0.0, 0.0]
                folded = self.pot[0] != self.pot[1]  # the pot accounting of a real-stakes hand says who folded
                won = (self.pot[0] > self.pot[1]) if folded else (self.cards[0] > self.cards[1])
                return [1.0, -1.0] if won else [-1.0, 1.0]

        game_type = pyspiel.GameType(
            short_name="arena_kuhn_poker_free_bets", long_name="Kuhn Poker with free bets (TextArena v1)",
            dynamics=pyspiel.GameType.Dynamics.SEQUENTIAL,
            chance_mode=pyspiel.GameType.ChanceMode.EXPLICIT_STOCHASTIC,
            information=pyspiel.GameType.Information.IMPERFECT_INFORMATION,
            utility=pyspiel.GameType.Utility.ZERO_SUM, reward_model=pyspiel.GameType.RewardModel.TERMINAL,
            max_num_players=2, min_num_players=2, provides_information_state_string=True,
            provides_information_state_tensor=True, provides_observation_string=True,
            provides_observation_tensor=True, provides_factored_observation_string=True)
        game_info = pyspiel.GameInfo(num_distinct_actions=2, max_chance_outcomes=3, num_players=2,
                                     min_utility=-1.0, max_utility=1.0, utility_sum=0.0, max_game_length=3)

        class FreeBetGame(py_kuhn.KuhnPokerGame):
            def __init__(self, params=None):
                pyspiel.Game.__init__(self, game_type, game_info, params or {})

            def new_initial_state(self):
                return FreeBetState(self)

        try:
            pyspiel.register_game(game_type, FreeBetGame)
        except Exception:  # registered already in this process (a module reloaded): load it by name
            pass
        _FREE_BET_GAME = pyspiel.load_game("arena_kuhn_poker_free_bets")
    return _FREE_BET_GAME

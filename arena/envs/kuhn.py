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

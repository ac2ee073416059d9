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
* Returns: TextArena's, as in v1: +1 to the player with more chips after the last round, -1 to
  the other, 0 each for equal chips (possible here, never in 5 rounds of v1).

Version history
---------------
* v1: TextArena 0.7.4's Kuhn Poker as it is, SPIRAL's exact setting (SPIRAL's published results
  are on it). TextArena sets the pot to the two antes each round and never adds a bet or a call
  to it: after bet-call the winner still takes 2 chips, as after check-check, so every round is
  worth +-1 whatever was bet.
* v2: real stakes (this module). The text interface, the number of rounds and the returns are
  v1's.
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

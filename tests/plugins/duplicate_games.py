"""A plug-in that (wrongly) registers an id the arena already has."""

import gymnasium

gymnasium.register(id="openspiel/tic_tac_toe-v0", entry_point="pettingzoo.classic.tictactoe_v3:env")

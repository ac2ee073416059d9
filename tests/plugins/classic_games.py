"""A plug-in that registers PettingZoo classic board games as they are (tensor observations)."""

import gymnasium

gymnasium.register(id="plugin/ConnectFourPZ-v3", entry_point="pettingzoo.classic.connect_four_v3:env")
gymnasium.register(id="plugin/GoPZ-v5", entry_point="pettingzoo.classic.go_v5:env", kwargs={"board_size": 9})
# chess_v6 needs the `chess` package; its entry point is imported only when the game is made.
gymnasium.register(id="plugin/ChessPZ-v6", entry_point="pettingzoo.classic.chess_v6:env")

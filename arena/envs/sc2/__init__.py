"""StarCraft II through pysc2 (the ``sc2`` extra, ``pysc2-evolved``).

Importing this package imports nothing heavy: pysc2 is loaded on first use, through
`arena.envs.sc2._pysc2`, which raises `arena.errors.MissingExtra` with the install command
when the extra is absent.
"""

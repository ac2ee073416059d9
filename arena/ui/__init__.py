"""Presentation: terminal tables and views, plots, the HTML report, the replay viewer.

Everything here reads league data through `arena.league.queries` and replays through
`arena.replays`; nothing below `arena.ui` imports it.
"""

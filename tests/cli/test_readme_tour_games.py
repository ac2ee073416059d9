"""The README tour's chains of the long-running games (Connect Four, the prosthetics task), apart from
`test_readme_tour.py` so that a second test worker runs them beside the rest."""

import pytest

from .test_readme_tour import GAMES_CHAINS, run_chain


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("group", GAMES_CHAINS, ids="+".join)
def test_every_games_tour_command_runs(group, tmp_path):
    run_chain(group, tmp_path)

"""Screenshots of the pages (docs/web_leaderboard.png, web_matches.png, web_replay.png, web_play.png,
web_poker.png: a hand of Kuhn poker played on the page, web_returns.png: a one-player league's
table), taken in headless chromium on a small quickstart league and a CartPole league built for them.

Run:  .venv/bin/python -m arena.ui.web.screenshots [--out docs] [--chromium /usr/bin/chromium]
Needs Playwright (the ``dev`` extra) and a chromium; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def take(out: Path, chromium: str = "/usr/bin/chromium", matches: int = 60) -> list[Path]:
    from playwright.sync_api import sync_playwright

    from arena.config import from_dict
    from arena.league.config import LeagueConfig, load_league_config
    from arena.league.manager import League
    from arena.ui.web.app import start_in_background

    root = Path(__file__).resolve().parents[3]
    out.mkdir(parents=True, exist_ok=True)
    shots = []
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_league_config(root / "configs/leagues/quickstart.yaml", matches=matches)
        League(cfg, Path(tmp) / "league", backend="inline").run()
        with start_in_background(Path(tmp) / "league", port=0) as srv, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 800}, bypass_csp=True)  # for wait_for_function

            def shot(name: str) -> None:
                path = out / f"web_{name}.png"
                page.screenshot(path=str(path))
                shots.append(path)

            page.goto(srv.url + "/")
            page.wait_for_selector("#heatmap rect")
            box = page.locator("#curves .hover-area").bounding_box()  # the readout of the chart's hover
            page.mouse.move(box["x"] + box["width"] * 0.7, box["y"] + box["height"] / 2)
            shot("leaderboard")
            page.goto(srv.url + "/matches")
            page.wait_for_selector("#matches tr:nth-child(2)")
            shot("matches")
            listed = page.request.get(srv.url + "/api/matches?game=openspiel/tic_tac_toe-v0&limit=200").json()
            pick = max(listed["matches"], key=lambda m: (m["moves"], m["commit_seq"]))
            page.goto(srv.url + "/replay/" + pick["match_id"])
            page.wait_for_selector("#r-board svg")
            for _ in range(3):
                page.click("#r-next")
            shot("replay")
            page.goto(srv.url + "/play")
            page.wait_for_selector("#p-game option[value='openspiel/tic_tac_toe-v0']", state="attached")
            page.select_option("#p-game", "openspiel/tic_tac_toe-v0")
            page.select_option("#p-player", "mcts")
            page.click("#p-start")
            page.wait_for_selector("#p-status[data-status='your_turn']")
            page.locator("#p-board rect.cell.playable").nth(4).click()
            page.wait_for_function("document.querySelectorAll('#p-board [data-mark]').length >= 2")
            shot("play")
            page.goto(srv.url + "/play")
            page.wait_for_selector("#p-game option[value='openspiel/kuhn_poker-v0']", state="attached")
            page.select_option("#p-game", "openspiel/kuhn_poker-v0")
            page.select_option("#p-player", "cfr")
            page.select_option("#p-seat", "1")
            page.click("#p-start")
            while True:
                page.wait_for_selector("#p-status[data-status='your_turn'], #p-status[data-status='over']")
                if page.get_attribute("#p-status", "data-status") == "over":
                    break
                page.locator("#p-moves button").last.click()  # bet, or call a bet
                page.wait_for_function("document.querySelector('#p-status').dataset.status !== 'your_turn'")
            page.wait_for_selector("#p-result table")
            shot("poker")
            browser.close()
        solo = Path(tmp) / "solo"
        cfg = from_dict(LeagueConfig, {"name": "cartpole", "seed": 0, "games": [{"id": "CartPole-v1"}], "matches": 10,
                                       "seeds": 5, "players": [{"name": "random", "agent": "random"},
                                                               {"name": "always_left", "agent": "first"}]})
        League(cfg, solo, backend="inline").run()
        with start_in_background(solo, port=0) as srv, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(srv.url + "/")
            page.wait_for_selector("#board tr:nth-child(2)")
            shot("returns")
            browser.close()
    return shots


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("docs"))
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    for path in take(args.out, args.chromium):
        print(path)


if __name__ == "__main__":
    main()

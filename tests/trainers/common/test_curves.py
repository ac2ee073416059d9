"""curves.png: a panel per metric, and one panel for every metric under a prefix ending in ``/*``."""

import json

from arena.trainers.common import metrics


def test_a_prefix_panel_draws_every_metric_under_it(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": i, "train/return": 0.1 * i, "train/entropy/type": 0.01, "train/entropy/units": 0.3,
             "train/orders/move": 0.0} for i in range(1, 5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    drawn = []
    from matplotlib.axes import Axes

    real = Axes.plot
    monkeypatch.setattr(Axes, "plot", lambda self, xs, ys, **kw: drawn.append((self, kw.get("label"), list(ys)))
                        or real(self, xs, ys, **kw))
    out = metrics.plot_curves(path, tmp_path / "curves.png",
                              keys=("train/return", "train/entropy/*", "train/orders/*", "train/missing/*", "nope"))
    assert out.stat().st_size > 1000
    # four lines: the return (no legend), and the two entropies and the one order share under their prefixes;
    # a prefix or a key with no metric draws nothing
    assert sorted(str(label) for _, label, _ in drawn) == ["None", "move", "type", "units"]
    assert [ys for _, label, ys in drawn if label == "units"] == [[0.3] * 4]

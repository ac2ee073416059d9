"""arena.inference.entity: the set transformer and the pointer head (shapes, symmetry, masking, learning)."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from arena.inference.entity import EntityEncoder, PointerHead  # noqa: E402

torch.set_num_threads(1)

B, N, F, D = 5, 7, 6, 32


def _nets(seed: int = 0) -> tuple[EntityEncoder, PointerHead]:
    torch.manual_seed(seed)
    enc = EntityEncoder(F, d_model=D, heads=4, layers=2, ff=64).eval()
    ptr = PointerHead(query_dim=D, key_dim=D, d=16).eval()
    return enc, ptr


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, N, F, generator=g)
    mask = torch.ones(B, N, dtype=torch.bool)
    mask[1, 4:] = False  # rows with some entities missing, in the middle too
    mask[2, [0, 3]] = False
    mask[3, 1:] = False  # a single entity
    return x, mask


def _point(enc, ptr, x, mask):
    emb, pooled = enc(x, mask)
    return emb, pooled, ptr(pooled, emb, mask)


def test_shapes_and_out_dim():
    enc, ptr = _nets()
    x, mask = _batch()
    emb, pooled, logits = _point(enc, ptr, x, mask)
    assert enc.out_dim == D
    assert emb.shape == (B, N, D) and pooled.shape == (B, D) and logits.shape == (B, N)
    assert torch.isfinite(emb).all() and torch.isfinite(pooled).all()
    assert (emb[~mask] == 0).all()  # padding comes out as zero embeddings
    with pytest.raises(ValueError, match="multiple of heads"):
        EntityEncoder(F, d_model=30, heads=4)
    with pytest.raises(TypeError, match="bool"):
        enc(x, mask.float())
    with pytest.raises(TypeError, match="required"):
        enc(x, None)


def test_permuting_entities_permutes_embeddings_and_logits_and_keeps_the_summary():
    enc, ptr = _nets()
    x, mask = _batch()
    emb, pooled, logits = _point(enc, ptr, x, mask)
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(1))
    p_emb, p_pooled, p_logits = _point(enc, ptr, x[:, perm], mask[:, perm])
    torch.testing.assert_close(p_emb, emb[:, perm], atol=1e-5, rtol=0)
    torch.testing.assert_close(p_pooled, pooled, atol=1e-5, rtol=0)
    torch.testing.assert_close(p_logits, logits[:, perm], atol=1e-5, rtol=0)


def test_padding_entities_do_not_change_the_real_ones():
    enc, ptr = _nets()
    x, mask = _batch()
    emb, pooled, logits = _point(enc, ptr, x, mask)
    junk = 100 * torch.randn(B, 4, F, generator=torch.Generator().manual_seed(2))
    junk[0, 0, 0] = float("nan")  # not even NaN in a padded slot leaks
    x2 = torch.cat([x, junk], dim=1)
    mask2 = torch.cat([mask, torch.zeros(B, 4, dtype=torch.bool)], dim=1)
    emb2, pooled2, logits2 = _point(enc, ptr, x2, mask2)
    torch.testing.assert_close(emb2[:, :N], emb, atol=1e-5, rtol=0)
    torch.testing.assert_close(pooled2, pooled, atol=1e-5, rtol=0)
    real = logits > -1e30
    torch.testing.assert_close(logits2[:, :N][real], logits[real], atol=1e-5, rtol=0)
    assert (logits2[:, N:] == torch.finfo(logits2.dtype).min).all()


def test_a_masked_entity_is_never_chosen():
    enc, ptr = _nets()
    x, mask = _batch()
    with torch.no_grad():
        _, _, logits = _point(enc, ptr, x, mask)
    probs = logits.softmax(-1)
    assert not torch.isnan(probs).any()
    assert (probs[~mask] == 0).all()
    assert probs[3, 0] == 1.0  # exactly one valid entity: it gets all the mass
    picks = torch.multinomial(probs, 1000, replacement=True, generator=torch.Generator().manual_seed(3))
    assert mask.gather(1, picks).all()
    assert len(picks[0].unique()) > 1  # and the sampling is not degenerate


def test_a_row_with_no_entities_gives_zeros_not_nan():
    enc, ptr = _nets()
    enc.train()  # the training path too
    x, mask = _batch()
    mask[4] = False
    emb, pooled, logits = _point(enc, ptr, x, mask)
    assert torch.isfinite(emb).all() and torch.isfinite(pooled).all() and not torch.isnan(logits).any()
    assert (emb[4] == 0).all() and (pooled[4] == 0).all()
    assert not torch.isnan(logits.softmax(-1)).any()
    # and gradients through such a row stay finite
    (emb.sum() + pooled.sum() + logits.softmax(-1)[:, 0].sum()).backward()
    assert all(torch.isfinite(p.grad).all() for p in [*enc.parameters(), *ptr.parameters()] if p.grad is not None)


def _argmax_sets(g: torch.Generator, batch: int, n_max: int = 8, dim: int = 4):
    x = torch.rand(batch, n_max, dim, generator=g)
    counts = torch.randint(2, n_max + 1, (batch,), generator=g)
    # Random slots, not a prefix, so the net cannot lean on where the padding is.
    order = torch.rand(batch, n_max, generator=g).argsort(dim=1)
    mask = order < counts[:, None]
    target = x[..., 0].masked_fill(~mask, -1.0).argmax(dim=1)
    return x, mask, target


def test_encoder_and_pointer_learn_to_point_at_the_largest_feature():
    torch.manual_seed(0)
    enc = EntityEncoder(4, d_model=32, heads=4, layers=2, ff=64)
    ptr = PointerHead(32, 32, d=32)
    opt = torch.optim.Adam([*enc.parameters(), *ptr.parameters()], lr=3e-3)
    g = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    for _ in range(300):
        x, mask, target = _argmax_sets(g, 128)
        emb, pooled = enc(x, mask)
        loss = torch.nn.functional.cross_entropy(ptr(pooled, emb, mask), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        x, mask, target = _argmax_sets(torch.Generator().manual_seed(123), 2000)
        emb, pooled = enc(x, mask)
        accuracy = (ptr(pooled, emb, mask).argmax(dim=1) == target).float().mean().item()
    assert accuracy >= 0.9, f"accuracy {accuracy:.3f} after 300 steps ({time.perf_counter() - start:.1f} s)"

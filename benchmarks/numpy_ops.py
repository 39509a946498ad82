#!/usr/bin/env python3
"""Micro-benchmarks of the NumPy backend's hot Moonshine ops against candidate replacements.

Companion of ``moonshine_offline.py``: its profile shows where NumPy time goes; this script times the
engine's current op (``engine.backends.numpy_backend.NumpyBackend``) beside a candidate implementation on
the shapes Moonshine uses (``--variant``), and reports the candidate's max |difference| (GELU: against an
exact float64 GELU). Nothing here changes the engine; the candidates are suggestions for it.

    .venv/bin/python benchmarks/numpy_ops.py --variant medium
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (str(HERE.parent), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import _common  # noqa: E402

# (enc hidden, enc heads, head_dim, enc ffn, dec hidden, dec heads, dec ffn, dec layers, enc layers)
SHAPES = {
    "tiny": (320, 8, 40, 1280, 320, 8, 1280, 6, 6),
    "small": (620, 8, 64, 2480, 512, 8, 2048, 10, 10),
    "medium": (768, 10, 64, 3072, 640, 10, 2560, 14, 14),
}


def timeit(fn, min_time: float = 0.3) -> float:
    """Median microseconds per call of ``fn`` (batches of calls, at least ``min_time`` s in all)."""
    import statistics

    fn()
    n, t = 1, 0.0
    while t < 0.02:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        n *= 2
    per = []
    reps = max(3, int(min_time / t))
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t0) / n)
    return 1e6 * statistics.median(per)


# ---- candidates ---------------------------------------------------------------------------------------

# Abramowitz & Stegun 7.1.26: erf(z) = 1 - (a1 t + ... + a5 t^5) exp(-z^2), t = 1 / (1 + p z), z >= 0;
# |error| <= 1.5e-7, below float32 resolution of erf near 1.
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def gelu_f32(x, block: int = 1 << 16):
    """Exact-erf GELU in float32, branch-free, in cache-sized blocks with in-place ufuncs.

    ``gelu(x) = x (1 + erf(x / sqrt 2)) / 2 = relu(x) - |x| erfc(|x| / sqrt 2) / 2`` (x erf(x) is even), with
    erfc from Abramowitz & Stegun 7.1.26 (``|error| <= 1.5e-7``). No masks: ``np.where`` / ``copyto(where=)``
    cost ~7 ns per element here, ten times a plain float32 ufunc pass.
    """
    import numpy as np

    f = np.float32
    out = np.empty_like(x)
    xf, of = x.reshape(-1), out.reshape(-1)
    n = xf.size
    z = np.empty(min(block, n), dtype=np.float32)
    t = np.empty_like(z)
    p = np.empty_like(z)
    for a in range(0, n, block):
        b = min(n, a + block)
        m = b - a
        xs, zs, ts, ps, os_ = xf[a:b], z[:m], t[:m], p[:m], of[a:b]
        np.abs(xs, out=zs)  # |x|
        np.multiply(zs, f(_AS_P * 0.7071067811865476), out=ts)
        ts += f(1.0)
        np.reciprocal(ts, out=ts)  # t = 1 / (1 + p |x| / sqrt 2)
        np.multiply(ts, f(_AS_A[4]), out=ps)
        for c in (_AS_A[3], _AS_A[2], _AS_A[1]):
            ps += f(c)
            ps *= ts
        ps += f(_AS_A[0])  # p = a1 + t (a2 + ...); erfc = t p exp(-x^2 / 2)
        ps *= ts
        np.square(xs, out=ts)
        ts *= f(-0.5)
        np.exp(ts, out=ts)
        ps *= ts  # erfc(|x| / sqrt 2)
        ps *= zs
        ps *= f(0.5)  # |x| erfc / 2
        np.maximum(xs, f(0.0), out=os_)
        os_ -= ps
    return out


def layer_norm_lean(x, w, eps=1e-5):
    """LayerNorm over the last axis with fewer temporaries (same float32 math)."""
    import numpy as np

    mu = x.mean(axis=-1, keepdims=True)
    c = x - mu
    var = np.einsum("...i,...i->...", c, c)[..., None]
    var *= np.float32(1.0 / x.shape[-1])
    var += np.float32(eps)
    np.sqrt(var, out=var)
    c /= var
    if w is not None:
        c *= w
    return c


def attention_one(q, k, v, scale):
    """Single-query attention ``q [H, 1, d]`` over ``k, v [H, T, d]`` without a mask."""
    import numpy as np

    s = np.matmul(k, q[:, 0, :, None] * np.float32(scale))[..., 0]  # [H, T]: batched gemv
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return np.matmul(s[:, None, :], v)


def encoder_attention(q, k, v, scale, left: int, right: int, block: int = 32):
    """Windowed encoder attention (HF semantics: keys q-left+1 .. q+right-1) in query blocks of ``block``,
    with an additive 0/-inf mask per block geometry (cached) and an in-place softmax."""
    import numpy as np

    _, t, _ = q.shape
    r = max(right, 1)
    out = np.empty_like(q)
    cache: dict = {}
    for a in range(0, t, block):
        b = min(t, a + block)
        ka, kb = max(0, a - left + 1), min(t, b + r - 1)
        key = (b - a, a - ka, kb - ka)
        m = cache.get(key)
        if m is None:
            d = np.arange(a, b)[:, None] - np.arange(ka, kb)[None, :]
            m = cache[key] = np.where((d < left) & (-d < r), np.float32(0), np.float32(-np.inf))
        s = np.matmul(q[:, a:b], k[:, ka:kb].transpose(0, 2, 1))
        s *= np.float32(scale)
        s += m
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        np.matmul(s, v[:, ka:kb], out=out[:, a:b])
    return out


def conv1d_shifted(x, w, b, stride: int = 1):
    """The backend's valid conv1d (weights as ``prepare_conv`` lays them out: ``[C_out, K * C_in]``) as a
    sum of K strided GEMMs, without building the im2col matrix."""
    c_out, kc = w.shape
    c_in = x.shape[1]
    k = kc // c_in
    t_out = (x.shape[0] - k) // stride + 1
    span = stride * (t_out - 1) + 1
    y = x[0:span:stride] @ w[:, 0:c_in].T
    for j in range(1, k):
        y += x[j : j + span : stride] @ w[:, j * c_in : (j + 1) * c_in].T
    return y if b is None else y + b


def rope_table(hd: int, f: int, pos: int, inv_freq):
    """Per-channel (cos, signed sin) tables [hd] for one position: channels past 2f get (1, 0)."""
    import numpy as np

    ang = pos * inv_freq
    cos = np.ones(hd, dtype=np.float32)
    sin = np.zeros(hd, dtype=np.float32)
    cos[: 2 * f] = np.repeat(np.cos(ang), 2)
    sin[0 : 2 * f : 2] = -np.sin(ang)
    sin[1 : 2 * f : 2] = np.sin(ang)
    return cos, sin


def rope_lean(x, cos, sin):
    """Interleaved partial RoPE with whole-head tables: ``x*cos + pairswap(x)*sin`` ([H, T, hd])."""
    h, t, hd = x.shape
    sw = x.reshape(h, t, hd // 2, 2)[..., ::-1].reshape(h, t, hd)
    return x * cos + sw * sin


# ---- main ---------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", default="medium", choices=list(SHAPES))
    ap.add_argument("--frames", type=int, default=500, help="encoder frames (500 = 10 s)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    _common.set_threads(args.threads)

    import numpy as np

    from engine.backends.numpy_backend import NumpyBackend

    B = NumpyBackend()
    De, He, hd, Fe, Dd, Hd, Fd, Ld, Le = SHAPES[args.variant]
    T = args.frames
    rng = np.random.default_rng(0)
    other = _common.OtherLoad().start()

    def threads_for(macs: int) -> None:
        """Pool size as the engine's BLAS policy would pick it for a product of ``macs`` multiply-adds."""
        if getattr(B, "blas", None) is not None:
            B.blas.for_work(macs)

    rows: list[list[str]] = []

    def row(name, cur_fn, new_fn, diff, calls):
        tc, tn = timeit(cur_fn), timeit(new_fn)
        rows.append(
            [name, f"{tc:.1f}", f"{tn:.1f}", f"{tc / tn:.1f}x", f"{diff:.1e}", f"{calls * (tc - tn) / 1000:.2f}"]
        )

    # GELU on the encoder MLP activations [T, F_enc]; exact reference: math.erf in float64.
    x = (rng.standard_normal((T, Fe)) * 2.0).astype(np.float32)
    x64 = x.astype(np.float64)
    ref = 0.5 * x64 * (1.0 + np.frompyfunc(math.erf, 1, 1)(x64 * 0.7071067811865476).astype(np.float64))
    d = float(np.max(np.abs(gelu_f32(x) - ref)))
    d_cur = float(np.max(np.abs(B.gelu(x) - ref)))
    row(f"encoder gelu [{T},{Fe}] (current err {d_cur:.1e})", lambda: B.gelu(x), lambda: gelu_f32(x), d, Le)

    # LayerNorm on the encoder residual stream [T, De] and on one decoder row [1, Dd].
    xe = rng.standard_normal((T, De)).astype(np.float32)
    we = (1 + 0.2 * rng.standard_normal(De)).astype(np.float32)
    d = float(np.max(np.abs(layer_norm_lean(xe, we) - B.layer_norm(xe, we, None, 1e-5))))
    row(
        f"encoder layer_norm [{T},{De}]",
        lambda: B.layer_norm(xe, we, None, 1e-5),
        lambda: layer_norm_lean(xe, we),
        d,
        2 * Le + 1,
    )
    xd = rng.standard_normal((1, Dd)).astype(np.float32)
    wd = (1 + 0.2 * rng.standard_normal(Dd)).astype(np.float32)
    d = float(np.max(np.abs(layer_norm_lean(xd, wd) - B.layer_norm(xd, wd, None, 1e-5))))
    row(
        f"decoder layer_norm [1,{Dd}] (per token)",
        lambda: B.layer_norm(xd, wd, None, 1e-5),
        lambda: layer_norm_lean(xd, wd),
        d,
        3 * Ld + 1,
    )

    # Encoder q, k, v: three [T, De] x [He hd, De]^T GEMMs vs one fused [3 He hd, De] GEMM.
    wq = [(rng.standard_normal((He * hd, De)) / De**0.5).astype(np.float32) for _ in range(3)]
    wqkv = np.concatenate(wq, axis=0)
    d = float(np.max(np.abs(np.concatenate([B.linear(xe, w) for w in wq], axis=1) - B.linear(xe, wqkv))))
    row(
        f"encoder q,k,v: 3 x [{He * hd},{De}] vs fused [{3 * He * hd},{De}] on [{T},{De}]",
        lambda: [B.linear(xe, w) for w in wq],
        lambda: B.linear(xe, wqkv),
        d,
        Le,
    )

    # Encoder windowed attention of one layer, (16, 4) window: the model's loop (blocks of 128 queries,
    # boolean mask, np.where) vs blocks of 32 with a cached additive mask.
    from engine.backends import window_mask
    from engine.models.moonshine.model import ENC_BLOCK

    qe, ke, ve = (rng.standard_normal((He, T, hd)).astype(np.float32) for _ in range(3))
    sc_e = hd**-0.5
    pos_e = np.arange(T)

    def enc_attn_model(L=16, R=4):
        outs = []
        for a in range(0, T, ENC_BLOCK):
            b = min(T, a + ENC_BLOCK)
            ka, kb = max(0, a - L + 1), min(T, b + max(R, 1) - 1)
            m = window_mask(pos_e[a:b], pos_e[ka:kb], L, R)
            outs.append(B.attention(qe[:, a:b], ke[:, ka:kb], ve[:, ka:kb], sc_e, B.asarray(m)))
        return np.concatenate(outs, axis=1)

    def enc_attn_new():
        threads_for(qe.size * 50)  # the engine's policy for the per-block products (one thread)
        return encoder_attention(qe, ke, ve, sc_e, 16, 4)

    d = float(np.max(np.abs(enc_attn_model() - enc_attn_new())))
    row(
        f"encoder attention [{He},{T},{hd}] window (16,4): blocks of {ENC_BLOCK} vs 32 + additive mask",
        enc_attn_model,
        enc_attn_new,
        d,
        Le,
    )

    # Frontend conv1 (D -> 2D, kernel 5, stride 2) on 2T + 4 input frames: im2col vs 5 strided GEMMs.
    xc = rng.standard_normal((2 * T + 4, De)).astype(np.float32)
    wc = B.prepare_conv((rng.standard_normal((2 * De, De, 5)) / (5 * De) ** 0.5).astype(np.float32))
    bc = rng.standard_normal(2 * De).astype(np.float32)

    def conv_new():
        threads_for(1 << 62)  # large GEMMs: the full pool, as the engine's policy picks for the im2col GEMM
        return conv1d_shifted(xc, wc, bc, stride=2)

    d = float(np.max(np.abs(B.conv1d(xc, wc, bc, stride=2) - conv_new())))
    row(
        f"frontend conv1 [{2 * T + 4},{De}] -> [{T + 2},{2 * De}]: im2col vs 5 strided GEMMs",
        lambda: B.conv1d(xc, wc, bc, stride=2),
        conv_new,
        d,
        1,
    )

    # Decoder cross-attention of one query over the whole memory; self-attention over ~40 positions.
    hdd = Dd // Hd
    for tk, what in ((T, "cross"), (40, "self")):
        q = rng.standard_normal((Hd, 1, hdd)).astype(np.float32)
        k = rng.standard_normal((Hd, tk, hdd)).astype(np.float32)
        v = rng.standard_normal((Hd, tk, hdd)).astype(np.float32)
        sc = hdd**-0.5
        d = float(np.max(np.abs(attention_one(q, k, v, sc) - B.attention(q, k, v, sc))))
        row(
            f"decoder {what}-attention 1 x {tk} (per token)",
            lambda q=q, k=k, v=v, sc=sc: B.attention(q, k, v, sc),
            lambda q=q, k=k, v=v, sc=sc: attention_one(q, k, v, sc),
            d,
            Ld,
        )

    # RoPE on one token's q (and k): current op vs whole-head tables.
    rot = int(hdd * 0.8)
    inv = 1.0 / (10000.0 ** (np.arange(0, rot, 2, dtype=np.float64) / rot))
    f = len(inv)
    pos = 33
    qh = rng.standard_normal((Hd, 1, hdd)).astype(np.float32)
    cos, sin = np.cos(pos * inv)[None].astype(np.float32), np.sin(pos * inv)[None].astype(np.float32)
    ct, st = rope_table(hdd, f, pos, inv)
    d = float(np.max(np.abs(rope_lean(qh, ct, st) - B.rope(qh, cos, sin, True))))
    row(
        f"decoder rope [{Hd},1,{hdd}] (per token, q and k)",
        lambda: B.rope(qh, cos, sin, True),
        lambda: rope_lean(qh, ct, st),
        d,
        2 * Ld,
    )

    # Decoder matrix-vector products, weights streamed from memory (many copies, as in a real step):
    # q, k, v as three [Dd, Dd] products vs one fused [3 Dd, Dd] product, each under the engine's BLAS
    # thread policy (``B.blas``: one thread below 64M multiply-adds over matrices below 4M elements), and
    # every decoder weight shape under the engine's policy vs the full pool.
    blas = getattr(B, "blas", None)

    def pool(n_macs: int) -> None:
        if blas is not None:
            blas.for_work(n_macs)

    def streamed(shape, budget=150_000_000):
        k = max(2, min(40, budget // (shape[0] * shape[1] * 4)))
        return [rng.standard_normal(shape).astype(np.float32) for _ in range(k)]

    ws = streamed((3 * Dd, Dd))
    wsep = [np.split(w, 3, axis=0) for w in ws]
    h = rng.standard_normal((1, Dd)).astype(np.float32)
    it = [0]

    def three():
        it[0] = (it[0] + 1) % len(ws)
        return [B.linear(h, w) for w in wsep[it[0]]]

    def fused():
        it[0] = (it[0] + 1) % len(ws)
        return B.linear(h, ws[it[0]])

    it[0] = -1
    sep = np.concatenate(three(), axis=1)
    it[0] = -1
    d = float(np.max(np.abs(sep - fused())))
    row(f"decoder q,k,v: 3 x [{Dd},{Dd}] vs fused [{3 * Dd},{Dd}] (per token, engine policy)", three, fused, d, Ld)
    if blas is not None:
        for shape, calls, what in (
            ((Dd, Dd), 3 * Ld, "o / cross-q / cross-o"),
            ((3 * Dd, Dd), Ld, "fused q,k,v"),
            ((2 * Fd, Dd), Ld, "fc1"),
            ((Dd, Fd), Ld, "fc2"),
            ((32768, Dd), 1, "proj_out"),
        ):
            wl = streamed(shape)
            hx = rng.standard_normal((1, shape[1])).astype(np.float32)
            j = [0]

            def gemv(n_threads, wl=wl, hx=hx, j=j):
                j[0] = (j[0] + 1) % len(wl)
                if n_threads == 1:  # the engine's linear as it is: its policy picks the pool size
                    return B.linear(hx, wl[j[0]])
                policy = blas.for_work
                try:  # the same call with the policy switched off and the full pool selected
                    policy(1 << 62)
                    blas.for_work = lambda *a, **k: None
                    return B.linear(hx, wl[j[0]])
                finally:
                    blas.for_work = policy

            row(
                f"decoder {what} [{shape[0]},{shape[1]}] B.linear: engine thread policy vs {blas.full} threads "
                "(per token)",
                lambda g=gemv: g(1),
                lambda g=gemv: g(0),
                0.0,
                calls,
            )
        pool(1 << 62)

    load = other.stop()
    print(
        f"variant {args.variant}, {T} frames, {args.threads} threads, {_common.numpy_blas()}; other processes "
        f"used {'?' if load is None else f'{100 * load:.0f}%'} of the CPU meanwhile"
    )
    print(
        _common.markdown_table(
            [
                "op (shape)",
                "current us",
                "candidate us",
                "speed-up",
                "max abs diff",
                "saved ms (per 10 s encode / per token)",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

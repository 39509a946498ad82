"""NumPy backend: float32 everywhere, BLAS matmuls; the fast path on CPUs and the exactness reference."""

from __future__ import annotations

import numpy as np

from .base import Backend
from .blas import BlasThreads

# NumPy has no erf: W. J. Cody's rational approximations (erf for |x| <= 0.47, erfc beyond), in float64.
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02, 3.20937758913846947e03,
          1.85777706184603153e-1)
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
_ERFC_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01, 2.98635138197400131e02,
           8.81952221241769090e02, 1.71204761263407058e03, 2.05107837782607147e03, 1.23033935479799725e03,
           2.15311535474403846e-8)
_ERFC_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02, 1.62138957456669019e03,
           3.29079923573345963e03, 4.36261909014324716e03, 3.43936767414372164e03, 1.23033935480374942e03)
_ERFC_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1, 1.60837851487422766e-2,
           6.58749161529837803e-4, 1.63153871373020978e-2)
_ERFC_Q = (2.56852019228982242e00, 1.87295284992346725e00, 5.27905102951428412e-1, 6.05183413124413191e-2,
           2.33520497626869185e-3)
_SQRPI = 5.6418958354775628695e-1


def _erf64(x: np.ndarray) -> np.ndarray:
    """erf in float64 (Cody 1969), vectorised."""
    ax = np.abs(x)
    out = np.empty_like(x)
    small = ax <= 0.46875
    if small.any():
        z = x[small]
        y = z * z
        num = _ERF_A[4] * y
        den = y
        for i in range(3):
            num = (num + _ERF_A[i]) * y
            den = (den + _ERF_B[i]) * y
        out[small] = z * (num + _ERF_A[3]) / (den + _ERF_B[3])
    mid = (~small) & (ax <= 4.0)
    if mid.any():
        y = ax[mid]
        num = _ERFC_C[8] * y
        den = y
        for i in range(7):
            num = (num + _ERFC_C[i]) * y
            den = (den + _ERFC_D[i]) * y
        erfc = np.exp(-y * y) * (num + _ERFC_C[7]) / (den + _ERFC_D[7])
        out[mid] = np.sign(x[mid]) * (1.0 - erfc)
    big = ax > 4.0
    if big.any():
        y = ax[big]
        z = 1.0 / (y * y)
        num = _ERFC_P[5] * z
        den = z
        for i in range(4):
            num = (num + _ERFC_P[i]) * z
            den = (den + _ERFC_Q[i]) * z
        r = z * (num + _ERFC_P[4]) / (den + _ERFC_Q[4])
        erfc = np.exp(-y * y) * (_SQRPI - r) / y
        out[big] = np.sign(x[big]) * (1.0 - erfc)
    return out


class NumpyBackend(Backend):
    """The op set on NumPy; computes in float32 whatever the checkpoint dtype."""

    name = "numpy"
    xp = np

    def __init__(self):
        self.blas = BlasThreads()

    def linear(self, x, w, b=None):
        self.blas.for_work(x.size * w.shape[0])
        y = x @ w.T
        return y if b is None else y + b

    def asarray(self, a, dtype=None):
        a = np.asarray(a)
        if dtype in (None, "float32", "float16", "bfloat16"):
            return a if a.dtype.kind in "iub" and dtype is None else np.asarray(a, dtype=np.float32)
        return np.asarray(a, dtype=dtype)

    def to_numpy(self, x):
        x = np.asarray(x)
        return x.astype(np.float32) if x.dtype.kind == "f" and x.dtype != np.float32 else x

    def zeros(self, shape, dtype="float32"):
        return np.zeros(shape, dtype=np.float32 if dtype in ("float16", "bfloat16") else dtype)

    def dtype_name(self, x):
        return str(np.asarray(x).dtype)

    def astype(self, x, dtype):
        return x.astype(np.float32 if dtype in ("float16", "bfloat16") else dtype, copy=False)

    def erf(self, x):
        return _erf64(np.asarray(x, dtype=np.float64)).astype(x.dtype, copy=False)

    def gelu(self, x):
        x64 = x.astype(np.float64)
        return (0.5 * x64 * (1.0 + _erf64(x64 * 0.7071067811865476))).astype(x.dtype)

    def silu(self, x):
        with np.errstate(over="ignore"):
            return x / (1.0 + np.exp(-x))

    def softmax(self, x, axis=-1):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        e /= np.sum(e, axis=axis, keepdims=True)
        return e

    def attention(self, q, k, v, scale, mask=None):
        hq, hkv = q.shape[0], k.shape[0]
        if hq != hkv:  # grouped-query: fold the query groups into the time axis, no K/V copies
            g = hq // hkv
            tq = q.shape[1]
            qg = q.reshape(hkv, g * tq, q.shape[2])
            m = None if mask is None else np.tile(mask, (g, 1))
            out = self.attention(qg, k, v, scale, m)
            return out.reshape(hq, tq, out.shape[-1])
        self.blas.for_work(q.size * k.shape[1])
        s = np.matmul(q * np.float32(scale), k.transpose(0, 2, 1))
        if mask is not None:
            s = np.where(mask, s, np.float32(-np.inf))
        return np.matmul(self.softmax(s, axis=-1), v)

    def prepare_conv(self, w):
        c_out, c_in, k = w.shape
        # [K * C_in, C_out] so that an im2col row (k-major, then channel) multiplies it directly.
        return np.ascontiguousarray(np.asarray(w, dtype=np.float32).transpose(2, 1, 0).reshape(k * c_in, c_out))

    def conv1d(self, x, w, b, stride=1):
        kc, c_out = w.shape
        c_in = x.shape[1]
        k = kc // c_in
        t_out = (x.shape[0] - k) // stride + 1
        if t_out <= 0:
            return np.zeros((0, c_out), dtype=np.float32)
        span = stride * (t_out - 1) + 1
        cols = np.concatenate([x[j : j + span : stride] for j in range(k)], axis=1)
        self.blas.for_work(cols.size * c_out)
        y = cols @ w
        return y if b is None else y + b


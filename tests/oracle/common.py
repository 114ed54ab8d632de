"""Shared pieces of the Python oracle tests: finding the library, independent oracles
(PyTorch in float64 / int64 and a direct loop over DESIGN.md's formulas), layout and
weight-convention mappings, independent rounding to the reduced float formats, tolerances,
and the pass/fail counter.

Nothing here calls the library to compute an expectation: the only library calls are the
ones under test (through python/xconv.py).
"""

import math
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def setup(argv):
    """Points the binding at BUILD_DIR (argv[1]) when given, then imports it."""
    if len(argv) > 1 and argv[1]:
        path = os.path.abspath(argv[1])
        os.environ["XCONV_LIB"] = path
    sys.path.insert(0, os.path.join(REPO, "python"))
    import xconv  # noqa: E402  (the path is set just above)
    xconv.load_library()
    return xconv


def import_torch():
    import torch
    torch.set_num_threads(1)
    return torch


# ---------------------------------------------------------------------------------------
# Counting
# ---------------------------------------------------------------------------------------

class Counter:
    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0
        self.skipped = 0

    def ok(self, cond, what, detail=""):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL %s%s" % (what, (": " + detail) if detail else ""), flush=True)
        return cond

    def finish(self):
        extra = ", %d skipped" % self.skipped if self.skipped else ""
        print("%s: %d passed, %d failed%s" % (self.name, self.passed, self.failed, extra))
        return 1 if self.failed else 0


# ---------------------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------------------

class Problem:
    """One problem in DESIGN.md's terms, channels-first PyTorch conventions for the oracle.
    lo/hi/stride/dilation/outpad are per-dim lists."""

    def __init__(self, op, d, stride, dilation, lo, hi, outpad, groups):
        self.op, self.d = op, d
        self.stride, self.dilation = list(stride), list(dilation)
        self.lo, self.hi = list(lo), list(hi)
        self.outpad = list(outpad)
        self.groups = groups

    def out_size(self, X, K):
        out = []
        for i in range(self.d):
            s, t, lo, hi = self.stride[i], self.dilation[i], self.lo[i], self.hi[i]
            if self.op == "conv":
                num = X[i] + lo + hi - t * (K[i] - 1) - 1
                out.append(num // s + 1 if num >= 0 else 0)
            else:
                out.append((X[i] - 1) * s - lo - hi + t * (K[i] - 1) + self.outpad[i] + 1)
        return out

    def kwargs(self):
        """The binding's keyword arguments."""
        return dict(stride=self.stride, dilation=self.dilation,
                    padding=list(zip(self.lo, self.hi)), groups=self.groups,
                    output_padding=self.outpad if self.op == "conv_transpose" else 0,
                    transpose=self.op == "conv_transpose")

    def describe(self):
        return ("%s%dd s%s d%s p%s:%s op%s g%d" % (
            self.op, self.d, _j(self.stride), _j(self.dilation), _j(self.lo), _j(self.hi),
            _j(self.outpad), self.groups))


def _j(v):
    return "x".join(str(a) for a in v)


# ---------------------------------------------------------------------------------------
# Layout mappings (DESIGN.md §1)
# ---------------------------------------------------------------------------------------

def cf_to_cl(a):
    """[N, C, X..] -> [N, X.., C]."""
    return np.moveaxis(a, 1, -1)


def cl_to_cf(a):
    return np.moveaxis(a, -1, 1)


def w_pt_to_mlx(w_pt, op, groups):
    """PyTorch weight -> MLX weight [Cout, K.., Cin/g].
    conv: [Cout, Cin/g, K..] -> move axis 1 last.
    conv_transpose: w_pt [Cin, Cout/g, K..] with
        w_pt[G*Cin/g + a, b, k] = w_mlx[G*Cout/g + b, k, a]."""
    if op == "conv":
        return np.moveaxis(w_pt, 1, -1)
    cin, cout_g = w_pt.shape[0], w_pt.shape[1]
    ks = list(w_pt.shape[2:])
    d = len(ks)
    cin_g = cin // groups
    a = w_pt.reshape([groups, cin_g, cout_g] + ks)          # [G, a, b, k..]
    a = np.transpose(a, [0, 2] + list(range(3, 3 + d)) + [1])  # [G, b, k.., a]
    return a.reshape([groups * cout_g] + ks + [cin_g])


def w_mlx_to_pt(w_mlx, op, groups):
    """The inverse of w_pt_to_mlx."""
    if op == "conv":
        return np.moveaxis(w_mlx, -1, 1)
    cout = w_mlx.shape[0]
    ks = list(w_mlx.shape[1:-1])
    cin_g = w_mlx.shape[-1]
    d = len(ks)
    cout_g = cout // groups
    a = w_mlx.reshape([groups, cout_g] + ks + [cin_g])          # [G, b, k.., a]
    a = np.transpose(a, [0, 2 + d, 1] + list(range(2, 2 + d)))  # [G, a, b, k..]
    return a.reshape([groups * cin_g, cout_g] + ks)


# ---------------------------------------------------------------------------------------
# Oracles
# ---------------------------------------------------------------------------------------

def torch_conv(torch, p, x, w, bias=None):
    """The problem's y (channels-first) by PyTorch, in x's torch dtype (float64, int64 or
    complex128 as given). Asymmetric padding by F.pad; conv_transpose by the full
    (unpadded) transposed conv, extended by zeros where output padding exceeds hi, then
    cropped to [lo, lo + Y): from y[j] = sum_{j + lo = i*s + k*t} x[i] w[k]."""
    xt = torch.as_tensor(np.array(x))  # a writable copy: views may be read-only
    wt = torch.as_tensor(np.array(w))
    y = torch_conv_t(torch, p, xt, wt).detach().numpy().copy()
    if bias is not None:
        y = y + np.asarray(bias).reshape([1, -1] + [1] * p.d)
    return y


def torch_conv_t(torch, p, xt, wt):
    """torch_conv on torch tensors (differentiable), without bias."""
    import torch.nn.functional as F
    d = p.d
    if p.op == "conv":
        pads = []
        for i in reversed(range(d)):
            pads += [p.lo[i], p.hi[i]]
        if any(pads):
            xt = F.pad(xt, pads)
        fn = getattr(F, "conv%dd" % d)
        y = fn(xt, wt, stride=p.stride, dilation=p.dilation, groups=p.groups)
    else:
        fn = getattr(F, "conv_transpose%dd" % d)
        full = fn(xt, wt, stride=p.stride, dilation=p.dilation, groups=p.groups)
        X = list(xt.shape[2:])
        K = list(wt.shape[2:])
        Y = p.out_size(X, K)
        ext = []
        for i in reversed(range(d)):
            ext += [0, max(0, p.outpad[i] - p.hi[i])]
        if any(ext):
            full = F.pad(full, ext)
        sl = [slice(None), slice(None)] + [slice(p.lo[i], p.lo[i] + Y[i]) for i in range(d)]
        y = full[tuple(sl)]
    return y


def direct(p, x, w, bias=None):
    """DESIGN.md §1's sums as written, with numpy object arithmetic (Python ints or floats):
    the slow oracle for tiny problems that checks the PyTorch-based one."""
    d = p.d
    N, Cin = x.shape[0], x.shape[1]
    X = list(x.shape[2:])
    K = list(w.shape[2:])
    Y = p.out_size(X, K)
    g = p.groups
    xo = x.astype(object)
    wo = w.astype(object)
    if p.op == "conv":
        Cout = w.shape[0]
        cin_g, cout_g = Cin // g, Cout // g
        y = np.zeros([N, Cout] + Y, dtype=object)
        for co in range(Cout):
            G = co // cout_g
            for o in np.ndindex(*Y):
                acc = np.zeros(N, dtype=object)
                for k in np.ndindex(*K):
                    idx = [o[i] * p.stride[i] + k[i] * p.dilation[i] - p.lo[i] for i in range(d)]
                    if all(0 <= idx[i] < X[i] for i in range(d)):
                        for c in range(cin_g):
                            xv = xo[(slice(None), G * cin_g + c) + tuple(idx)]
                            acc = acc + xv * wo[(co, c) + k]
                y[(slice(None), co) + o] = acc
    else:
        cout_g = w.shape[1]
        Cout = cout_g * g
        cin_g = Cin // g
        y = np.zeros([N, Cout] + Y, dtype=object)
        for ci in range(Cin):
            G = ci // cin_g
            for i_pos in np.ndindex(*X):
                for k in np.ndindex(*K):
                    j = [i_pos[i] * p.stride[i] + k[i] * p.dilation[i] - p.lo[i] for i in range(d)]
                    if all(0 <= j[i] < Y[i] for i in range(d)):
                        for c in range(cout_g):
                            y[(slice(None), G * cout_g + c) + tuple(j)] += (
                                xo[(slice(None), ci) + i_pos] * wo[(ci, c) + k])
    if bias is not None:
        y = y + np.asarray(bias).astype(object).reshape([1, -1] + [1] * d)
    return y


# Integer results: the true sum modulo 2^bits(y). Computed exactly from 16-bit limbs of
# the inputs' two's-complement (mod 2^64) images: each limb product is < 2^32 and each limb
# conv is an exact int64 sum (reduction lengths < 2^31), so
#   y = sum_{a,b} conv(x_a, w_b) << 16(a+b)   (mod 2^64)
# holds exactly with uint64 wrapping.

INT_BITS = {"u8": 8, "i8": 8, "u16": 16, "i16": 16, "u32": 32, "i32": 32, "u64": 64, "i64": 64}
INT_NP = {"u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16,
          "u32": np.uint32, "i32": np.int32, "u64": np.uint64, "i64": np.int64}


def _mod64(a):
    a = np.asarray(a)
    if a.dtype == np.uint64:
        return a.copy()
    return a.astype(np.int64).view(np.uint64)


def int_oracle(torch, p, x, w, bias, y_name):
    """Exact integer y as y_name's numpy dtype."""
    bits = INT_BITS[y_name]
    limbs = (bits + 15) // 16
    xm, wm = _mod64(x), _mod64(w)
    acc = None
    for a in range(limbs):
        xa = ((xm >> np.uint64(16 * a)) & np.uint64(0xFFFF)).astype(np.int64)
        for b in range(limbs - a):
            wb = ((wm >> np.uint64(16 * b)) & np.uint64(0xFFFF)).astype(np.int64)
            part = torch_conv(torch, p, xa, wb).astype(np.int64).view(np.uint64)
            part = part << np.uint64(16 * (a + b))
            acc = part if acc is None else acc + part
    if bias is not None:
        acc = acc + _mod64(bias).reshape([1, -1] + [1] * p.d)
    return acc.astype(INT_NP[y_name])  # keeps the low bits: modulo 2^bits(y)


# ---------------------------------------------------------------------------------------
# Reduced float formats, rounded independently of the library
# ---------------------------------------------------------------------------------------

# mantissa bits, smallest normal exponent, largest finite value, overflow behaviour
FORMATS = {
    "f16": (10, -14, 65504.0, "inf"),
    "bf16": (7, -126, float.fromhex("0x1.fep127"), "inf"),
    "f8e4m3": (3, -6, 448.0, "saturate"),
    "f8e5m2": (2, -14, 57344.0, "inf"),
    "f32": (23, -126, float.fromhex("0x1.fffffep127"), "inf"),
}


def ulp(v, fmt):
    """The spacing of `fmt` at the magnitude of v (elementwise)."""
    m, emin, _, _ = FORMATS[fmt]
    v = np.abs(np.asarray(v, dtype=np.float64))
    _, e = np.frexp(np.where(v > 0, v, 1.0))
    e = np.maximum(e - 1, emin)
    return np.ldexp(1.0, e - m)


def round_to(v, fmt):
    """v (float64) rounded to nearest even in `fmt`, back as float64. Overflow goes to inf,
    or saturates to the largest finite value for e4m3 (OCP FN, as DESIGN.md says). NaN
    stays NaN."""
    m, emin, maxf, over = FORMATS[fmt]
    v = np.asarray(v, dtype=np.float64)
    u = ulp(v, fmt)
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.round(v / u) * u  # exact scaling by powers of two; np.round is half-even
        # The largest finite value rounds up to inf from the midpoint to the next binade.
        big = np.abs(r) > maxf
        r = np.where(big, np.copysign(maxf if over == "saturate" else np.inf, v), r)
        r = np.where(np.isinf(v), np.copysign(maxf, v) if over == "saturate" else v, r)
    return np.where(np.isnan(v), np.nan, r)


def random_in_format(rng, shape, fmt, scale=1.0):
    """Random values exactly representable in fmt (normal-ish magnitudes)."""
    return round_to(rng.standard_normal(shape) * scale, fmt)


# ---------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------

EPS = {"f32": 2.0 ** -24, "f64": 2.0 ** -53, "c64": 2.0 ** -24, "c128": 2.0 ** -53}


def abs_sum(torch, p, x, w, bias):
    """sum |x*w| per output (plus |bias|): the scale of the rounding error."""
    s = torch_conv(torch, p, np.abs(x).astype(np.float64), np.abs(w).astype(np.float64))
    if bias is not None:
        s = s + np.abs(np.asarray(bias)).astype(np.float64).reshape([1, -1] + [1] * p.d)
    return s


def reduction_length(p, w):
    """Terms per output: Cin/g * prod(K) for conv; at most Cin/g * prod(ceil(K*t/s)) for
    the transpose, bounded here by Cin/g * prod(K)."""
    if p.op == "conv":
        return int(np.prod(w.shape[1:]))
    return int(w.shape[0] // p.groups * np.prod(w.shape[2:]))


def max_excess(got, want, tol):
    """The worst |got - want| - tol (<= 0 means all within), with NaN/Inf positions
    required to agree exactly. Returns (excess, index) for reporting."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return math.inf, "shape %s vs %s" % (got.shape, want.shape)
    if got.size == 0:
        return 0.0, None
    gn, wn = np.isnan(got), np.isnan(want)
    if np.any(gn != wn):
        return math.inf, "NaN at %s" % (np.argwhere(gn != wn)[0],)
    gi, wi = np.isinf(got), np.isinf(want)
    if np.any(gi != wi) or np.any(got[gi] != want[wi]):
        return math.inf, "Inf at %s" % (np.argwhere((gi != wi) | (gi & (got != want)))[0],)
    fin = ~(gn | gi)
    err = np.abs(got.astype(np.complex128) - want.astype(np.complex128))
    tol = np.broadcast_to(np.asarray(tol, dtype=np.float64), got.shape)
    excess = np.where(fin, err - tol, -np.inf)
    i = np.unravel_index(int(np.argmax(excess)), excess.shape)
    return float(excess[i]), "at %s got %r want %r tol %.3g" % (
        tuple(int(a) for a in i), got[i], want[i], tol[i])

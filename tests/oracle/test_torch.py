"""PyTorch as the oracle for random problems, through the Python binding.

    /usr/bin/python3 tests/oracle/test_torch.py [BUILD_DIR]

Covers conv and conv_transpose, ranks 1-3, stride, dilation, asymmetric padding, output
padding up to max(stride, dilation) - 1, groups (depthwise too), bias, both layouts, N = 0
and N > 1, strided / reversed / broadcast views, strided outputs with canaries, every
dtype and the widening pairs, and every engine forced by name on a subset. Expectations
come from PyTorch (float64, int64 limbs for exact integers; see common.py), never from the
library. Ends with "test_torch: N passed, N failed".
"""

import sys

import numpy as np

import common
from common import Problem

SEED = 20240611
N_RANDOM = 2000
N_PER_ENGINE = 120
N_CUDA = 800
N_TC = 60
N_WINOGRAD = 150

FLOAT_PAIRS = [("f64", "f64"), ("f32", "f32"), ("f32", "f64"), ("c64", "c64"),
               ("c128", "c128"), ("c64", "c128"), ("f16", "f16"), ("f16", "f32"),
               ("bf16", "bf16"), ("bf16", "f32"), ("f8e4m3", "f8e4m3"), ("f8e4m3", "f32"),
               ("f8e5m2", "f8e5m2"), ("f8e5m2", "f32"), ("bf16", "f64"), ("f16", "f64")]
INT_PAIRS = [("u8", "u8"), ("i8", "i8"), ("u16", "u16"), ("i16", "i16"), ("u32", "u32"),
             ("i32", "i32"), ("u64", "u64"), ("i64", "i64"), ("u8", "i32"), ("u8", "u32"),
             ("u8", "u64"), ("i8", "i32"), ("i8", "i64"), ("i16", "i32"), ("u16", "u64"),
             ("i32", "i64"), ("u32", "u64")]
REDUCED = ("f16", "bf16", "f8e4m3", "f8e5m2")
NUMPY_FLOAT = {"f32": np.float32, "f64": np.float64, "c64": np.complex64,
               "c128": np.complex128, "f16": np.float16}


# ---------------------------------------------------------------------------------------
# Random problems
# ---------------------------------------------------------------------------------------

def gen_problem(rng, op=None, kind=None):
    """A random valid problem and its shapes (channels-first, PyTorch weights)."""
    op = op or ("conv" if rng.random() < 0.55 else "conv_transpose")
    d = int(rng.choice([1, 2, 3], p=[0.35, 0.4, 0.25]))
    kind = kind or rng.choice(["general", "general", "general", "general", "general",
                               "large", "1x1", "patch", "depthwise"])
    small = d == 3
    if kind in ("tc", "tc_patch"):  # what tensor-core engines take: 16-byte channel runs
        groups = int(rng.choice([1, 1, 2]))
        cin_g = int(rng.choice([16, 32]))
        cout_g = int(rng.integers(1, 41))
        kind = "patch" if kind == "tc_patch" else "general"
    elif kind == "large":  # past microkernel tiles and blocking edges
        groups = int(rng.choice([1, 1, 2]))
        cin_g = int(rng.integers(1, 9 if small else 21))
        cout_g = int(rng.integers(1, 9 if small else 34))
    elif kind == "depthwise":
        groups = int(rng.integers(1, 7))
        cin_g, cout_g = 1, int(rng.choice([1, 1, 2]))
    else:
        groups = int(rng.choice([1, 1, 1, 2, 3]))
        cin_g = int(rng.integers(1, 3 if small else 4))
        cout_g = int(rng.integers(1, 3 if small else 4))
    K, s, t, lo, hi, opad = [], [], [], [], [], []
    for _ in range(d):
        if kind == "1x1":
            k, si, ti, a, b = 1, 1, 1, 0, 0
        elif kind == "patch":
            k = int(rng.integers(1, 4))
            si, ti, a, b = k, 1, 0, 0
        else:
            k = int(rng.integers(1, 6 if d == 1 else 4))
            si = int(rng.integers(1, 4))
            ti = 1 if rng.random() < 0.5 else int(rng.integers(1, 4))
            a = 0 if rng.random() < 0.4 else int(rng.integers(0, 4))
            b = 0 if rng.random() < 0.4 else int(rng.integers(0, 4))
        K.append(k)
        s.append(si)
        t.append(ti)
        lo.append(a)
        hi.append(b)
        if op == "conv_transpose" and kind == "general" and rng.random() < 0.5:
            opad.append(int(rng.integers(0, max(si, ti))))
        else:
            opad.append(0)
    p = Problem(op, d, s, t, lo, hi, opad, groups)
    X = []
    for i in range(d):
        if op == "conv":
            need = max(1, t[i] * (K[i] - 1) + 1 - lo[i] - hi[i])
            if kind == "patch":
                X.append(K[i] * int(rng.integers(1, 4)))
            else:
                more = 12 if kind == "large" and d < 3 else (3 if small else 5)
                X.append(need + int(rng.integers(0, more)))
        else:
            X.append(int(rng.integers(1, 3 if small else (9 if kind == "large" else 5))))
    if op == "conv_transpose":  # shrink padding until every output size is >= 1
        for i in range(d):
            while p.out_size(X, K)[i] < 1:
                if p.hi[i] > 0:
                    p.hi[i] -= 1
                else:
                    p.lo[i] -= 1
    n = 0 if rng.random() < 0.05 else int(rng.integers(1, 4))
    cin, cout = cin_g * groups, cout_g * groups
    x_shape = [n, cin] + X
    w_shape = ([cout, cin_g] if op == "conv" else [cin, cout_g]) + K
    return p, x_shape, w_shape, cout


def gen_values(rng, shape, name, full_range):
    """Random values of dtype `name`, exactly representable (floats as float64/complex128
    holding values of the format)."""
    if name in common.INT_BITS:
        info = np.iinfo(common.INT_NP[name])
        if full_range:
            lo, hi = int(info.min), int(info.max)
        else:
            lo, hi = max(int(info.min), -7), min(int(info.max), 7)
        return rng.integers(lo, hi, size=shape, endpoint=True, dtype=common.INT_NP[name])
    if name in ("c64", "c128"):
        fmt = "f32" if name == "c64" else None
        re = rng.standard_normal(shape)
        im = rng.standard_normal(shape)
        if fmt:
            re, im = common.round_to(re, fmt), common.round_to(im, fmt)
        return re + 1j * im
    if name == "f64":
        return rng.standard_normal(shape)
    return common.random_in_format(rng, shape, name)


def make_view(rng, a):
    """`a`'s values in a randomly chosen memory arrangement: contiguous, reversed along an
    axis (negative stride), every other element of a bigger buffer (with an offset), or
    permuted strides."""
    if a.ndim == 0 or a.size == 0:
        return a
    how = rng.integers(0, 5)
    ax = int(rng.integers(0, a.ndim))
    if how == 0:
        return np.flip(np.ascontiguousarray(np.flip(a, ax)), ax)
    if how == 1:
        shape = list(a.shape)
        start = int(rng.integers(0, 2))
        shape[ax] = 2 * shape[ax] + start
        big = np.zeros(shape, dtype=a.dtype)
        sl = [slice(None)] * a.ndim
        sl[ax] = slice(start, None, 2)
        big[tuple(sl)] = a
        return big[tuple(sl)]
    if how == 2 and a.ndim > 1:
        c = np.ascontiguousarray(np.moveaxis(a, 0, -1))
        return np.moveaxis(c, -1, 0)
    return a


def broadcast_along(rng, a):
    """a made constant along one axis of size > 1, as a zero-stride view."""
    axes = [i for i in range(a.ndim) if a.shape[i] > 1]
    if not axes:
        return a
    ax = int(rng.choice(axes))
    sl = [slice(None)] * a.ndim
    sl[ax] = slice(0, 1)
    return np.broadcast_to(a[tuple(sl)], a.shape)


# ---------------------------------------------------------------------------------------
# Running one case
# ---------------------------------------------------------------------------------------

class Runner:
    def __init__(self, xconv, torch, counter):
        self.xconv, self.torch, self.c = xconv, torch, counter
        self.chosen = {}  # engine name -> problems it ran
        self.device = "cpu"

    def case(self, rng, p, x_shape, w_shape, cout, in_name, out_name, *, layout,
             with_bias, full_range=False, engine=None, views=True, label="", tf32=False):
        xconv, torch = self.xconv, self.torch
        x = gen_values(rng, x_shape, in_name, full_range)
        w = gen_values(rng, w_shape, in_name, full_range)
        if views and rng.random() < 0.06:
            x = np.ascontiguousarray(broadcast_along(rng, x))  # values; the view comes below
            bx = True
        else:
            bx = False
        bias = gen_values(rng, [cout], out_name, full_range) if with_bias else None
        desc = "%s%s %s->%s %s x%s w%s%s%s" % (
            label, p.describe(), in_name, out_name, layout, list(x_shape), list(w_shape),
            " bias" if with_bias else "", (" engine " + engine) if engine else "")

        # The oracle, channels-first.
        if in_name in common.INT_BITS:
            want = common.int_oracle(torch, p, x, w, bias, out_name)
            tol = None
        else:
            xf = np.asarray(x, dtype=np.complex128 if in_name[0] == "c" else np.float64)
            wf = np.asarray(w, dtype=xf.dtype)
            bf = None if bias is None else np.asarray(bias, dtype=xf.dtype)
            want = self.float_oracle(p, xf, wf, bf)
            scale = common.abs_sum(torch, p, xf, wf, bf)
            red = common.reduction_length(p, wf) + 2
            if out_name in REDUCED:
                want = common.round_to(want, out_name)
                tol = common.ulp(want, out_name) + red * common.EPS["f32"] * scale
            else:
                ct = "f64" if out_name in ("f64", "c128") else "f32"
                if in_name in ("c64", "c128"):
                    red *= 2
                tol = 2 * red * common.EPS[ct] * scale

        # The library's inputs, in the layout and in a random memory arrangement.
        self.use_ml = not getattr(self, "use_ml", False)
        if layout == "channels_last":
            xl = np.ascontiguousarray(common.cf_to_cl(x))
            wl = np.ascontiguousarray(common.w_pt_to_mlx(w, p.op, p.groups))
        else:
            xl, wl = x, w
        xl, wl = self.storage(xl, in_name), self.storage(wl, in_name)
        bl = None if bias is None else self.storage(bias, out_name)
        if bx:
            xl = broadcast_along_same(xl, x, layout)
        elif views:
            xl = make_view(rng, xl)
        if views:
            wl = make_view(rng, wl)
        kw = p.kwargs()
        if tf32:
            kw["allow_tf32"] = True
        dtype_arg = in_name if xl.dtype.kind == "f" and in_name in REDUCED[1:] else None
        threads = [None, 1, 2][int(rng.integers(0, 3))]
        out, big, canary = None, None, None
        if views and (out_name in common.INT_BITS or out_name in NUMPY_FLOAT):
            if rng.random() < 0.15:
                out, big, canary = self.strided_out(rng, p, xl.shape, wl.shape, layout, out_name)
        try:
            got, chosen = xconv.conv(xl, wl, bl, layout=layout, dtype=dtype_arg,
                                     out_dtype=out_name, engine=engine, threads=threads,
                                     out=out, return_engine=True, device=self.device, **kw)
            self.chosen[chosen] = self.chosen.get(chosen, 0) + 1
            if engine and chosen != engine:
                self.c.ok(False, desc, "forced %s but %s ran" % (engine, chosen))
                return False
        except xconv.XconvError as e:
            if engine and e.status_name == "UNSUPPORTED":
                self.c.skipped += 1
                return None
            self.c.ok(False, desc, "error %s" % e)
            return False
        if big is not None:
            mask = np.ones(big.shape, dtype=bool)
            mask[self.out_slices] = False
            untouched = bool(np.all(big[mask] == canary))
            if not self.c.ok(untouched, desc, "strided y: bytes outside the view were written"):
                return False
        if out is None and tol is not None and rng.random() < 0.1:
            # DESIGN.md §2: float results are bit-identical for any thread count.
            other = 2 if threads in (None, 1) else 1
            again = xconv.conv(xl, wl, bl, layout=layout, dtype=dtype_arg, out_dtype=out_name,
                               engine=chosen, threads=other, device=self.device, **kw)
            a, b = np.asarray(got), np.asarray(again)
            same = a.tobytes() == b.tobytes()
            self.c.ok(same, desc, "threads %s vs %s: results differ bitwise" % (threads, other))
        if layout == "channels_last":
            got = common.cl_to_cf(got)
        if tol is None:
            good = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
            bad = "" if good else _int_diff(got, want)
            return self.c.ok(good, desc, bad)
        gotf = np.asarray(got).astype(np.complex128 if out_name[0] == "c" else np.float64)
        excess, where = common.max_excess(gotf, want, tol)
        return self.c.ok(excess <= 0, desc, "excess %.3g %s" % (excess, where))

    def float_oracle(self, p, xf, wf, bf):
        torch = self.torch
        if xf.dtype == np.complex128:
            conv = lambda a, b: common.torch_conv(torch, p, a, b)  # noqa: E731
            y = (conv(xf.real, wf.real) - conv(xf.imag, wf.imag)
                 + 1j * (conv(xf.real, wf.imag) + conv(xf.imag, wf.real)))
            if bf is not None:
                y = y + bf.reshape([1, -1] + [1] * p.d)
            return y
        return common.torch_conv(torch, p, xf, wf, bf)

    def storage(self, a, name):
        """Values of dtype `name` as the array the binding takes: numpy dtypes as such;
        bf16/f8 as float32 holding exact values (converted by dtype=...), or ml_dtypes
        arrays when that package is loaded (every other call, to cover both paths)."""
        if name in common.INT_BITS:
            return np.asarray(a)
        if name in NUMPY_FLOAT:
            return np.asarray(a).astype(NUMPY_FLOAT[name])
        ml = self.xconv.ml_dtypes
        if ml is not None and self.use_ml:
            return np.asarray(a, dtype=np.float32).astype(
                getattr(ml, {"bf16": "bfloat16", "f8e4m3": "float8_e4m3fn",
                             "f8e5m2": "float8_e5m2"}[name]))
        return np.asarray(a, dtype=np.float32)

    def strided_out(self, rng, p, x_shape, w_shape, layout, name):
        """A y view with a negative or doubled stride inside a canary-filled buffer."""
        kw = p.kwargs()
        yshape = self.xconv.output_shape(x_shape, w_shape, layout=layout, **{
            k: v for k, v in kw.items()})
        dt = NUMPY_FLOAT.get(name) or common.INT_NP[name]
        ax = int(rng.integers(0, len(yshape)))
        shape = list(yshape)
        shape[ax] = 2 * shape[ax] + 1
        canary = dt(7)
        big = np.full(shape, canary, dtype=dt)
        sl = [slice(None)] * len(shape)
        if yshape[ax] > 0 and rng.random() < 0.5:
            sl[ax] = slice(2 * yshape[ax] - 1, None, -2)
        else:
            sl[ax] = slice(1, None, 2)
        self.out_slices = tuple(sl)
        view = big[self.out_slices]
        assert view.shape == tuple(yshape)
        return view, big, canary


def broadcast_along_same(xl, x_cf, layout):
    """The broadcast view matching the constant axis of x_cf, in the layout's order."""
    a = xl
    for ax in range(a.ndim):
        if a.shape[ax] > 1:
            first = np.take(a, [0], axis=ax)
            if np.array_equal(np.broadcast_to(first, a.shape), a):
                return np.broadcast_to(first, a.shape)
    return a


def _int_diff(got, want):
    if got.shape != want.shape or got.dtype != want.dtype:
        return "shape/dtype %s %s vs %s %s" % (got.shape, got.dtype, want.shape, want.dtype)
    i = tuple(np.argwhere(got != want)[0])
    return "%d mismatches, first at %s: got %d want %d" % (
        int(np.sum(got != want)), i, int(got[i]), int(want[i]))


# ---------------------------------------------------------------------------------------
# Groups of checks
# ---------------------------------------------------------------------------------------

def check_converters(xconv, c):
    """The library's scalar converters against independent decoders and rounding."""
    with np.errstate(invalid="ignore", over="ignore"):
        _check_converters(xconv, c)


def _check_converters(xconv, c):
    lib = xconv.load_library()
    codes16 = np.arange(1 << 16, dtype=np.uint32)
    codes8 = np.arange(256, dtype=np.uint32)

    def e4m3(v):
        s = -1.0 if v & 0x80 else 1.0
        e, m = (v >> 3) & 15, v & 7
        if e == 15 and m == 7:
            return np.nan
        return s * (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))

    def e5m2(v):
        s = -1.0 if v & 0x80 else 1.0
        e, m = (v >> 2) & 31, v & 3
        if e == 31:
            return s * np.inf if m == 0 else np.nan
        return s * (m / 4 * 2.0 ** -14 if e == 0 else (1 + m / 4) * 2.0 ** (e - 15))

    decoders = {
        "f16": (codes16, lib.xconv_f16_to_f32, lib.xconv_f32_to_f16,
                lambda cs: cs.astype(np.uint16).view(np.float16).astype(np.float64)),
        "bf16": (codes16, lib.xconv_bf16_to_f32, lib.xconv_f32_to_bf16,
                 lambda cs: (cs << 16).astype(np.uint32).view(np.float32).astype(np.float64)),
        "f8e4m3": (codes8, lib.xconv_f8e4m3_to_f32, lib.xconv_f32_to_f8e4m3,
                   lambda cs: np.array([e4m3(int(v)) for v in cs])),
        "f8e5m2": (codes8, lib.xconv_f8e5m2_to_f32, lib.xconv_f32_to_f8e5m2,
                   lambda cs: np.array([e5m2(int(v)) for v in cs])),
    }
    rng = np.random.default_rng(SEED + 1)
    for name, (codes, dec, enc, ref) in decoders.items():
        want = ref(codes)
        got = np.array([dec(int(v)) for v in codes], dtype=np.float64)
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        same &= (np.signbit(got) == np.signbit(want)) | np.isnan(want)
        bad = np.flatnonzero(~same)
        c.ok(bad.size == 0, "decode %s" % name,
             "" if bad.size == 0 else "code 0x%x: got %r want %r" % (codes[bad[0]], got[bad[0]],
                                                                    want[bad[0]]))
        # Encoding: every finite value, the midpoints between neighbours (ties to even) and
        # just beside them, random f32 values over the format's range, specials.
        fin = np.unique(want[np.isfinite(want)])
        mids = (fin[:-1] + fin[1:]) / 2
        tests = [fin, mids, np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
                 np.nextafter(mids.astype(np.float32), np.float32(-np.inf)),
                 rng.standard_normal(3000) * np.exp2(rng.integers(-30, 20, 3000)),
                 np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 3e38,
                           fin.max() * 1.01, -fin.max() * 1.01])]
        vals = np.concatenate([np.asarray(t, dtype=np.float64) for t in tests])
        vals = vals.astype(np.float32).astype(np.float64)  # the converters take f32
        expect = common.round_to(vals, name)
        lut = dict(zip(codes.tolist(), want.tolist()))
        nbad, first = 0, ""
        for v, e in zip(vals, expect):
            g = lut[int(enc(float(v)))]
            ok = (np.isnan(g) and np.isnan(e)) or (g == e and np.signbit(g) == np.signbit(e))
            if not ok:
                nbad += 1
                first = first or "f32 %r -> %r, want %r" % (v, g, e)
        c.ok(nbad == 0, "encode %s (%d values)" % (name, len(vals)),
             "%d wrong, first %s" % (nbad, first))


def check_oracle(xconv, torch, c, rng):
    """The PyTorch-based oracle and its layout mappings against the direct sums of
    DESIGN.md on tiny problems, and the library against both."""
    for i in range(36):
        p, xs, ws, cout = gen_problem(rng)
        xs[0] = min(xs[0], 2)
        x = rng.integers(-5, 6, size=xs).astype(np.int64)
        w = rng.integers(-5, 6, size=ws).astype(np.int64)
        b = rng.integers(-5, 6, size=[cout]).astype(np.int64) if i % 2 else None
        slow = direct(p, x, w, b)
        fast = common.torch_conv(torch, p, x.astype(np.float64), w.astype(np.float64), b)
        desc = "oracle self-check %s x%s w%s" % (p.describe(), xs, ws)
        c.ok(slow.shape == fast.shape and np.array_equal(slow.astype(np.float64), fast),
             desc, "direct vs torch differ")
        wm = common.w_pt_to_mlx(w, p.op, p.groups)
        c.ok(np.array_equal(common.w_mlx_to_pt(wm, p.op, p.groups), w), desc + " (w mapping)")
        got = xconv.conv(np.ascontiguousarray(common.cf_to_cl(x)), wm, b,
                         layout="channels_last", **p.kwargs())
        c.ok(np.array_equal(common.cl_to_cf(got), slow.astype(np.int64)),
             desc + " channels_last vs direct")


def check_torch_native(torch, c, rng):
    """Where PyTorch accepts the transposed problem natively (symmetric padding, output
    padding below stride or dilation), its result equals the crop-based oracle."""
    import torch.nn.functional as F
    done = 0
    while done < 40:
        p, xs, ws, cout = gen_problem(rng, op="conv_transpose")
        for i in range(p.d):
            p.lo[i] = p.hi[i] = min(p.lo[i], p.hi[i])
        if min(p.out_size(xs[2:], ws[2:])) < 1:
            continue
        x = rng.standard_normal(xs)
        w = rng.standard_normal(ws)
        fn = getattr(F, "conv_transpose%dd" % p.d)
        try:
            nat = fn(torch.as_tensor(x), torch.as_tensor(w), stride=p.stride, padding=p.lo,
                     output_padding=p.outpad, groups=p.groups, dilation=p.dilation).numpy()
        except RuntimeError:
            continue  # torch refuses output padding >= stride with dilation > stride
        ours = common.torch_conv(torch, p, x, w)
        c.ok(nat.shape == ours.shape and np.allclose(nat, ours, rtol=1e-12, atol=1e-12),
             "oracle vs native torch %s x%s w%s" % (p.describe(), xs, ws))
        done += 1


def check_binding(xconv, c):
    """The binding's own contract: descriptors of strided views, padding forms, errors."""
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    keep = []
    t = xconv._tensor(a, "f32", keep)
    c.ok(not t.strided and t.buffer_bytes == 96 and t.data == a.ctypes.data,
         "binding: contiguous descriptor")
    v = a[:, ::-1, 1:]
    t = xconv._tensor(v, "f32", keep)
    c.ok(t.strided and list(t.strides[:3]) == [12, -4, 1] and t.data == a.ctypes.data
         and t.buffer_bytes == 96 and t.offset == 9,
         "binding: reversed slice is a strided view of the base allocation",
         "strides %s offset %d bytes %d" % (list(t.strides[:3]), t.offset, t.buffer_bytes))
    bc = np.broadcast_to(a[:, :1], (2, 3, 4))
    t = xconv._tensor(bc, "f32", keep)
    c.ok(t.strided and list(t.strides[:3]) == [12, 0, 1], "binding: broadcast has stride 0")
    rec = np.zeros(12, dtype=[("v", "<f4"), ("pad", "u1")])
    odd = rec["v"].reshape(1, 1, 12)
    t = xconv._tensor(odd, "f32", keep)
    c.ok(not t.strided, "binding: byte strides off the element grid are copied")
    x = np.random.default_rng(1).standard_normal((2, 4, 7))
    w = np.random.default_rng(2).standard_normal((6, 2, 3))
    y1 = xconv.conv(x, w, padding=1, groups=2)
    y2 = xconv.conv(x, w, padding=[1], groups=2)
    y3 = xconv.conv(x, w, padding=[(1, 1)], groups=2)
    c.ok(np.array_equal(y1, y2) and np.array_equal(y1, y3), "binding: padding forms agree")
    y4 = xconv.conv(x, w, padding=[(0, 2)], groups=2)
    y5 = xconv.conv(np.pad(x, [(0, 0), (0, 0), (0, 2)]), w, groups=2)
    c.ok(np.allclose(y4, y5, rtol=1e-14, atol=1e-14), "binding: (lo, hi) padding")
    wt = np.random.default_rng(3).standard_normal((4, 3, 3))
    c.ok(np.array_equal(xconv.conv_transpose(x, wt, stride=2, groups=2),
                        xconv.conv(x, wt, stride=2, groups=2, transpose=True)),
         "binding: conv_transpose is conv(transpose=True)")
    c.ok(xconv.output_shape((2, 4, 7), (6, 2, 3), padding=[(0, 2)], groups=2, stride=2)
         == (2, 6, 4), "binding: output_shape")
    try:
        xconv.conv(x, w, groups=3)
        c.ok(False, "binding: groups 3 of 4 channels raises")
    except xconv.XconvError as e:
        c.ok(e.status_name == "INVALID_ARGUMENT" and e.parameter == "groups"
             and "3" in e.description and e.operation != "",
             "binding: error record fields", "%s | %s | %s | %s" % (
                 e.status_name, e.operation, e.parameter, e.description))
    try:
        xconv.conv(x, w.astype(np.float32), groups=2)
        c.ok(False, "binding: mixed x/w dtypes raise")
    except xconv.XconvError as e:
        c.ok(e.status_name == "INVALID_ARGUMENT", "binding: mixed dtypes", str(e))
    try:
        xconv.conv(x, w, groups=2, engine="no.such.engine")
        c.ok(False, "binding: unknown engine raises")
    except xconv.XconvError as e:
        c.ok(e.status != 0, "binding: unknown engine", str(e))


def direct(p, x, w, b):
    return common.direct(p, x, w, b)


def check_random(runner, rng, count):
    pairs = FLOAT_PAIRS + INT_PAIRS
    runner.chosen = {}
    for i in range(count):
        p, xs, ws, cout = gen_problem(rng)
        in_name, out_name = pairs[i % len(pairs)]
        layout = "channels_last" if rng.random() < 0.5 else "channels_first"
        runner.case(rng, p, xs, ws, cout, in_name, out_name, layout=layout,
                    with_bias=rng.random() < 0.5,
                    full_range=in_name in common.INT_BITS and rng.random() < 0.6,
                    label="#%d " % i)
    print("planner's choices over %d random problems: %s" % (
        count, ", ".join("%s %d" % kv for kv in sorted(runner.chosen.items()))))


def check_engines(xconv, runner, rng):
    """Every engine forced by name on the same problems; UNSUPPORTED is a skip."""
    names = xconv.engines()
    runner.c.ok(len(names) >= 1 and "cpu.ref" in names, "engines() lists cpu.ref",
                repr(names))
    pairs = [("f32", "f32"), ("f64", "f64"), ("i8", "i32"), ("u8", "u8"), ("i64", "i64"),
             ("bf16", "f32"), ("f16", "f16"), ("c64", "c64"), ("u32", "u32")]
    problems = []
    for i in range(N_PER_ENGINE):
        kind = ["general", "1x1", "patch", "depthwise", "large"][i % 5]
        problems.append(gen_problem(rng, kind=kind) + (pairs[i % len(pairs)],
                        "channels_last" if i % 3 == 0 else "channels_first", i % 2 == 0,
                        int(rng.integers(0, 1 << 30)), True))
    # Problems the tensor-core engines take: contiguous channels-last, 8/16-bit inputs.
    tc_pairs = [("bf16", "bf16"), ("f16", "f32"), ("f8e4m3", "f8e4m3"), ("f8e5m2", "f32"),
                ("i8", "i32"), ("u8", "u8"), ("f16", "f16"), ("bf16", "f32")]
    for i in range(N_TC):
        problems.append(gen_problem(rng, op="conv" if i % 3 else "conv_transpose",
                                    kind="tc_patch" if i % 3 == 1 else "tc")
                        + (tc_pairs[i % len(tc_pairs)], "channels_last", i % 2 == 0,
                           int(rng.integers(0, 1 << 30)), False))
    for name in names:
        before = runner.c.skipped
        if name.startswith("cuda."):
            if not cuda_available(xconv):
                runner.c.skipped += len(problems)
                print("engine %s: no CUDA device here, skipped" % name)
                continue
            runner.device = "cuda"
        for (p, xs, ws, cout, (a, b), layout, with_bias, seed, views) in problems:
            runner.case(np.random.default_rng(seed), p, xs, ws, cout, a, b, layout=layout,
                        with_bias=with_bias, full_range=True, engine=name, views=views,
                        label="[%s] " % name)
        runner.device = "cpu"
        ran = len(problems) - (runner.c.skipped - before)
        print("engine %s: ran %d of %d problems (others UNSUPPORTED)" % (name, ran,
                                                                          len(problems)))


def check_winograd(runner, rng, count):
    """cpu.winograd (opt-in: allow_tf32) on random convs whose inner kernel dims have 3
    taps at stride 1 and dilation 1 (F(2x2, 3x3), or F(2, 3) on the innermost dim with the
    others summed directly), f32, both layouts, views, bias; PyTorch's float64 result within
    the f32 tolerance of sum|x*w| (uniform values)."""
    ran = 0
    for i in range(count):
        d = [1, 2, 2, 3][i % 4]
        two = d >= 2 and i % 8 != 2  # else dim d-2 is summed directly (any stride/dilation)
        groups = 1
        cin, cout = int(rng.integers(1, 40)), int(rng.integers(1, 80))
        k, s, t, pad = [], [], [], []
        for j in range(d):
            inner = j == d - 1 or (two and j == d - 2)
            k.append(3 if inner else int(rng.integers(1, 4)))
            s.append(1 if inner else int(rng.integers(1, 3)))
            t.append(1 if inner else int(rng.integers(1, 3)))
            pad.append((int(rng.integers(0, 3)), int(rng.integers(0, 3))))
        x_sp = [int(rng.integers(max(1, t[j] * (k[j] - 1) + 1 - pad[j][0] - pad[j][1]),
                                 (8 if d == 3 else 15))) for j in range(d)]
        n = int(rng.integers(1, 3))
        p = Problem("conv", d, s, t, [a for a, _ in pad], [b for _, b in pad], [0] * d, groups)
        x_shape = [n, cin] + x_sp
        w_shape = [cout, cin] + k
        layout = "channels_last" if i % 2 else "channels_first"
        r = runner.case(rng, p, x_shape, w_shape, cout, "f32", "f32", layout=layout,
                        with_bias=i % 3 != 0, engine="cpu.winograd", label="[winograd] ",
                        tf32=True)
        ran += r is not None
    runner.c.ok(ran == count, "cpu.winograd ran every problem", "%d of %d" % (ran, count))


def check_special(xconv, runner, c):
    """Hand-made cases: e4m3 saturation, NaN/Inf propagation, N = 0 writes nothing."""
    x = np.array([[[288.0]]], dtype=np.float32)
    w = np.array([[[2.0]]], dtype=np.float32)
    y = np.asarray(xconv.conv(x, w, dtype="f8e4m3"), dtype=np.float64)
    c.ok(y.shape == (1, 1, 1) and y[0, 0, 0] == 448.0, "e4m3 saturates 576 to 448", repr(y))
    y = xconv.conv(x, w, dtype="f8e4m3", out_dtype="f32")
    c.ok(y[0, 0, 0] == 576.0, "e4m3 -> f32 keeps 576", repr(y))
    y = np.asarray(xconv.conv(np.full((1, 1, 1), 1.25, np.float32),
                              np.full((1, 1, 1), -1.25, np.float32), dtype="f8e5m2"),
                   dtype=np.float64)
    c.ok(y[0, 0, 0] == -1.5, "e5m2 rounds -1.5625 to -1.5", repr(y))
    x = np.array([[[1.0, np.inf, 2.0, np.nan, 3.0, 4.0]]])
    w = np.array([[[1.0, 0.0]]])
    y = xconv.conv(x, w)
    want = np.array([[[np.nan, np.inf, np.nan, np.nan, 3.0]]])  # inf*0 and nan*0 are NaN
    c.ok(np.array_equal(y, want, equal_nan=True), "NaN/Inf propagate (f64)", repr(y))
    w = np.array([[[1.0, 1.0]]], dtype=np.float32)
    y = xconv.conv(x.astype(np.float32), w)
    want = np.array([[[np.inf, np.inf, np.nan, np.nan, 7.0]]], dtype=np.float32)
    c.ok(np.array_equal(y, want, equal_nan=True), "NaN/Inf propagate (f32)", repr(y))
    for op in ("conv", "conv_transpose"):
        x = np.zeros((0, 4, 5), dtype=np.float32)
        w = np.ones((4, 2, 3), dtype=np.float32)
        y = xconv.conv(x, w, transpose=op == "conv_transpose", groups=2)
        c.ok(y.shape == ((0, 4, 3) if op == "conv" else (0, 4, 7)), "N = 0 %s" % op,
             repr(y.shape))


# ---------------------------------------------------------------------------------------
# im2col / col2im
# ---------------------------------------------------------------------------------------

def im2col_oracle(x, K, s, t, lo, hi):
    """channels-first cols by slicing the padded image (numpy, no library)."""
    d = len(K)
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(lo, hi)))
    X = x.shape[2:]
    Y = [(X[i] + lo[i] + hi[i] - t[i] * (K[i] - 1) - 1) // s[i] + 1 for i in range(d)]
    parts = []
    for k in np.ndindex(*K):
        sl = [slice(None), slice(None)] + [
            slice(k[i] * t[i], k[i] * t[i] + s[i] * (Y[i] - 1) + 1, s[i]) for i in range(d)]
        parts.append(xp[tuple(sl)])
    cols = np.stack(parts, axis=2)  # [N, C, prod(K), Y..]
    n, c = x.shape[:2]
    return cols.reshape(n, c * int(np.prod(K)), int(np.prod(Y))), Y


def col2im_oracle(cols, x_shape, K, s, t, lo, hi, acc_dtype):
    d = len(K)
    n, c = x_shape[:2]
    X = x_shape[2:]
    Y = [(X[i] + lo[i] + hi[i] - t[i] * (K[i] - 1) - 1) // s[i] + 1 for i in range(d)]
    cols = cols.reshape([n, c, int(np.prod(K))] + Y).astype(acc_dtype)
    xp = np.zeros([n, c] + [X[i] + lo[i] + hi[i] for i in range(d)], dtype=acc_dtype)
    for j, k in enumerate(np.ndindex(*K)):
        sl = [slice(None), slice(None)] + [
            slice(k[i] * t[i], k[i] * t[i] + s[i] * (Y[i] - 1) + 1, s[i]) for i in range(d)]
        xp[tuple(sl)] += cols[:, :, j]
    crop = [slice(None), slice(None)] + [slice(lo[i], lo[i] + X[i]) for i in range(d)]
    return xp[tuple(crop)]


def cuda_available(xconv):
    """Whether the library can reach a CUDA device (the binding's device="cuda")."""
    import ctypes
    try:
        rt = xconv._cuda()
    except OSError:
        return False
    count = ctypes.c_int(0)
    return rt.cudaGetDeviceCount(ctypes.byref(count)) == 0 and count.value > 0


def check_im2col(xconv, torch, c, rng, device="cpu"):
    import torch.nn.functional as F
    for i in range(40):
        d = 1 + i % 3
        K = [int(rng.integers(1, 4)) for _ in range(d)]
        s = [int(rng.integers(1, 3)) for _ in range(d)]
        t = [int(rng.integers(1, 3)) for _ in range(d)]
        lo = [int(rng.integers(0, 3)) for _ in range(d)]
        hi = [int(rng.integers(0, 3)) for _ in range(d)]
        X = [max(1, t[j] * (K[j] - 1) + 1 - lo[j] - hi[j]) + int(rng.integers(0, 4))
             for j in range(d)]
        n, ch = int(rng.integers(1, 3)), int(rng.integers(1, 4))
        integer = i % 4 == 3
        if integer:
            x = rng.integers(0, 256, size=[n, ch] + X).astype(np.uint8)
        else:
            x = rng.standard_normal([n, ch] + X)
        want, Y = im2col_oracle(x, K, s, t, lo, hi)
        desc = "im2col %dd k%s s%s d%s p%s:%s x%s" % (d, K, s, t, lo, hi, list(x.shape))
        if d == 2 and not integer:  # the slicing oracle against torch's unfold
            xt = F.pad(torch.as_tensor(x), [lo[1], hi[1], lo[0], hi[0]])
            u = F.unfold(xt, K, dilation=t, stride=s).numpy()
            c.ok(np.array_equal(u, want), desc + " (oracle vs F.unfold)")
        pad = list(zip(lo, hi))
        for layout in ("channels_first", "channels_last"):
            if layout == "channels_first":
                xin, w_l = make_view(rng, x), want
            else:
                xin = make_view(rng, np.ascontiguousarray(common.cf_to_cl(x)))
                kk = int(np.prod(K))
                w_l = want.reshape(n, ch, kk, -1).transpose(0, 3, 2, 1).reshape(n, -1, kk * ch)
            try:
                got = xconv.im2col(xin, K, stride=s, padding=pad, dilation=t, layout=layout,
                                   device=device)
                c.ok(got.shape == w_l.shape and np.array_equal(got, w_l), desc + " " + layout)
                # col2im: the adjoint, summing overlaps; u8 columns fold into u32 images.
                out = "u32" if integer else None
                img = xconv.col2im(make_view(rng, w_l), X, K, stride=s, padding=pad,
                                   device=device,
                                   dilation=t, layout=layout, out_dtype=out)
                fold = col2im_oracle(want, x.shape, K, s, t, lo, hi,
                                     np.uint32 if integer else np.float64)
                if layout == "channels_last":
                    img = common.cl_to_cf(img)
                c.ok(img.shape == fold.shape and np.allclose(img, fold, rtol=1e-13, atol=1e-13)
                     and img.dtype == fold.dtype, desc.replace("im2col", "col2im") + " " + layout)
            except xconv.XconvError as e:
                if device != "cpu" and e.status_name == "UNSUPPORTED":
                    c.skipped += 1  # unfolding on the device is not offered
                    continue
                c.ok(False, desc + " " + layout, "error %s" % e)
        if d == 2 and not integer:
            ft = F.fold(torch.as_tensor(want), [X[0] + lo[0] + hi[0], X[1] + lo[1] + hi[1]], K,
                        dilation=t, stride=s).numpy()[:, :, lo[0]:lo[0] + X[0], lo[1]:lo[1] + X[1]]
            fold = col2im_oracle(want, x.shape, K, s, t, lo, hi, np.float64)
            c.ok(np.allclose(ft, fold, rtol=1e-13, atol=1e-13), desc + " (fold oracle vs F.fold)")


def main():
    xconv = common.setup(sys.argv)
    torch = common.import_torch()
    c = common.Counter("test_torch")
    runner = Runner(xconv, torch, c)
    rng = np.random.default_rng(SEED)
    check_converters(xconv, c)
    check_binding(xconv, c)
    check_oracle(xconv, torch, c, rng)
    check_torch_native(torch, c, rng)
    check_special(xconv, runner, c)
    check_random(runner, rng, N_RANDOM)
    if xconv.ml_dtypes is not None:  # the no-ml_dtypes path too, on a few problems
        saved, xconv.ml_dtypes = xconv.ml_dtypes, None
        check_random(runner, np.random.default_rng(SEED + 2), 40)
        xconv.ml_dtypes = saved
    check_engines(xconv, runner, rng)
    check_winograd(runner, np.random.default_rng(SEED + 5), N_WINOGRAD)
    try:
        check_im2col(xconv, torch, c, rng)
    except AttributeError as e:  # a library without im2col yet
        c.ok(False, "im2col/col2im", str(e))
    if cuda_available(xconv):  # the planner's choices on CUDA tensors, and unfold there
        runner.device = "cuda"
        check_random(runner, np.random.default_rng(SEED + 3), N_CUDA)
        runner.device = "cpu"
        check_im2col(xconv, torch, c, np.random.default_rng(SEED + 4), device="cuda")
    else:
        print("no CUDA device: the CUDA passes are skipped")
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())

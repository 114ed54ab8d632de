#!/usr/bin/env python3
"""test_cli.py — drives `xconv run`, `caps`, `demo` end to end.

Usage: /usr/bin/python3 tests/cli/test_cli.py BUILD_DIR

Oracles: PyTorch's conv/conv_transpose in float64 (asymmetric padding through F.pad, or by
cropping a padding-free transpose), an input-dilated conv of the flipped weight for MLX's
channels-last conv_transpose, exact integer sums in float64 (all well below 2^53), and
NumPy's own dtype conversions. Never the code under test.
Ends with "test_cli: N passed, N failed"; exits non-zero on failure.
"""
import io
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
XCONV = os.path.join(BUILD, "xconv")
TMP = tempfile.mkdtemp(prefix="xconv_cli_")
ERROR_LINE = re.compile(r"^xconv: error: (.+?): (.+)\n$")

passed = 0
failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)
    return cond


_counter = [0]


def path(name):
    _counter[0] += 1
    return os.path.join(TMP, "%03d_%s" % (_counter[0], name))


def save(name, arr, version=None):
    p = path(name)
    with open(p, "wb") as f:
        if version is None:
            np.save(f, arr)
        else:
            np.lib.format.write_array(f, arr, version=version)
    return p


def xconv(*args):
    return subprocess.run([XCONV, *map(str, args)], capture_output=True, text=True, timeout=600)


# ---------------------------------------------------------------------------------------
# Oracles (float64, channels-first)
# ---------------------------------------------------------------------------------------

CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONVT = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def pad_arg(lo, hi):
    """F.pad's argument: last dim first."""
    out = []
    for l, h in zip(reversed(lo), reversed(hi)):
        out += [l, h]
    return out


def conv_oracle(x, w, b, stride, lo, hi, dil, groups):
    d = x.ndim - 2
    xt = F.pad(torch.from_numpy(x), pad_arg(lo, hi))
    bt = None if b is None else torch.from_numpy(b)
    return CONV[d](xt, torch.from_numpy(w), bt, stride, 0, dil, groups).numpy()


def convt_oracle(x, w, b, stride, lo, hi, dil, opad, groups):
    """Symmetric padding: PyTorch directly. Otherwise: crop a padding-free transpose."""
    d = x.ndim - 2
    xt, wt = torch.from_numpy(x), torch.from_numpy(w)
    bt = None if b is None else torch.from_numpy(b)
    if list(lo) == list(hi):
        return CONVT[d](xt, wt, bt, stride, list(lo), list(opad), groups, dil).numpy()
    full = CONVT[d](xt, wt, None, stride, 0, 0, groups, dil).numpy()
    ysz = [(x.shape[2 + i] - 1) * stride[i] - lo[i] - hi[i] + dil[i] * (w.shape[2 + i] - 1)
           + opad[i] + 1 for i in range(d)]
    y = np.zeros(full.shape[:2] + tuple(ysz))
    src = tuple(slice(lo[i], min(lo[i] + ysz[i], full.shape[2 + i])) for i in range(d))
    dst = tuple(slice(0, s.stop - s.start) for s in src)
    y[(slice(None), slice(None)) + dst] = full[(slice(None), slice(None)) + src]
    if b is not None:
        y += b.reshape((1, -1) + (1,) * d)
    return y


def to_cl(a):
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


def to_cf(a):
    return np.ascontiguousarray(np.moveaxis(a, -1, 1))


def mlx_w_to_pt_conv(w):
    """[Cout, K.., Cin/g] -> [Cout, Cin/g, K..]."""
    return to_cf(w)


def mlx_w_to_pt_convt(w, groups):
    """w_pt[G*Cin/g + a, b, k] = w_mlx[G*Cout/g + b, k, a]."""
    cout, cin_g = w.shape[0], w.shape[-1]
    d = w.ndim - 2
    ks = w.shape[1:-1]
    t = w.reshape((groups, cout // groups) + ks + (cin_g,))
    t = np.moveaxis(t, -1, 1)  # [g, cin_g, cout_g, K..]
    return np.ascontiguousarray(t.reshape((groups * cin_g, cout // groups) + ks))


def mlx_convt_flipped(x_cl, w_mlx, stride, pad, dil, groups):
    """MLX's own definition: conv of the input-dilated x with the flipped weight [Cout, K, Cin/g]
    (channels-last, symmetric padding p, no output padding)."""
    d = x_cl.ndim - 2
    x = to_cf(x_cl)
    n, c = x.shape[:2]
    xs = x.shape[2:]
    dil_shape = tuple((s - 1) * st + 1 for s, st in zip(xs, stride))
    xd = np.zeros((n, c) + dil_shape)
    xd[(slice(None), slice(None)) + tuple(slice(None, None, st) for st in stride)] = x
    wc = np.flip(w_mlx, axis=tuple(range(1, 1 + d)))
    wc = to_cf(np.ascontiguousarray(wc))  # [Cout, Cin/g, K..]
    ks = w_mlx.shape[1:-1]
    edge = [dil[i] * (ks[i] - 1) - pad[i] for i in range(d)]
    y = conv_oracle(xd, wc, None, [1] * d, edge, edge, dil, groups)
    return to_cl(y)


# ---------------------------------------------------------------------------------------
# Running problems
# ---------------------------------------------------------------------------------------

def fmt_list(v):
    return ",".join(str(int(a)) for a in v)


def fmt_pad(lo, hi):
    return ",".join("%d:%d" % (a, b) for a, b in zip(lo, hi))


def run_ok(name, args, out):
    r = xconv("run", *args, "--out", out)
    ok = check(r.returncode == 0, "%s: exit %d, stderr %r" % (name, r.returncode, r.stderr))
    check(r.stdout == "", "%s: run printed on stdout without -v: %r" % (name, r.stdout))
    if not ok or not os.path.exists(out):
        return None
    return np.load(out)


def close(name, y, ref, rtol):
    if y is None:
        return check(False, name + ": no output")
    if not check(y.shape == ref.shape, "%s: shape %s, expected %s" % (name, y.shape, ref.shape)):
        return False
    scale = max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    err = float(np.max(np.abs(y.astype(np.complex128) - ref))) if ref.size else 0.0
    return check(err <= rtol * scale, "%s: max err %.3g > %.3g" % (name, err, rtol * scale))


def random_problem(rng, op, d, groups=1, bias=True, cin=None, cout=None):
    cin = cin or groups * int(rng.integers(1, 4))
    cout = cout or groups * int(rng.integers(1, 4))
    n = int(rng.integers(1, 3))
    k = [int(rng.integers(1, 4)) for _ in range(d)]
    s = [int(rng.integers(1, 4)) for _ in range(d)]
    dil = [int(rng.integers(1, 3)) for _ in range(d)]
    if op == "conv":
        lo = [int(rng.integers(0, 3)) for _ in range(d)]
        hi = list(lo)
        xs = [dil[i] * (k[i] - 1) + 1 + int(rng.integers(0, 6)) for i in range(d)]
        w = rng.standard_normal((cout, cin // groups) + tuple(k))
        opad = [0] * d
    else:
        xs = [int(rng.integers(1, 6)) for _ in range(d)]
        lo = [int(rng.integers(0, min(2, dil[i] * (k[i] - 1)) + 1)) for i in range(d)]
        lo = [min(l, (xs[i] - 1) * s[i] // 2) for i, l in enumerate(lo)]
        hi = list(lo)
        opad = [int(rng.integers(0, max(s[i], dil[i]))) for i in range(d)]
        w = rng.standard_normal((cin, cout // groups) + tuple(k))
    x = rng.standard_normal((n, cin) + tuple(xs))
    b = rng.standard_normal(cout) if bias else None
    return dict(op=op, x=x, w=w, b=b, stride=s, lo=lo, hi=hi, dil=dil, opad=opad, groups=groups)


def oracle(p):
    if p["op"] == "conv":
        return conv_oracle(p["x"], p["w"], p["b"], p["stride"], p["lo"], p["hi"], p["dil"],
                           p["groups"])
    return convt_oracle(p["x"], p["w"], p["b"], p["stride"], p["lo"], p["hi"], p["dil"],
                        p["opad"], p["groups"])


def geometry_args(p):
    args = ["--op", p["op"], "--stride", fmt_list(p["stride"]), "--dilation", fmt_list(p["dil"]),
            "--groups", p["groups"]]
    if p["lo"] == p["hi"]:
        args += ["--padding", fmt_list(p["lo"])]
    else:
        args += ["--padding", fmt_pad(p["lo"], p["hi"])]
    if p["op"] == "conv_transpose":
        args += ["--output-padding", fmt_list(p["opad"])]
    return args


def run_problem(name, p, layout="channels_first", dtype=np.float64, rtol=1e-12, extra=()):
    ref = oracle(p)
    x, w, b = p["x"], p["w"], p["b"]
    if layout == "channels_last":
        x = to_cl(x)
        if p["op"] == "conv":
            w = to_cl(w)  # [Cout, Cin/g, K..] -> [Cout, K.., Cin/g]
        else:
            # Invert w_pt[G*Cin/g + a, b, k] = w_mlx[G*Cout/g + b, k, a].
            g = p["groups"]
            cin, cout_g = w.shape[:2]
            ks = w.shape[2:]
            t = w.reshape((g, cin // g, cout_g) + ks)
            t = np.moveaxis(t, 1, -1)  # [g, cout_g, K.., cin_g]
            w = np.ascontiguousarray(t.reshape((g * cout_g,) + ks + (cin // g,)))
            check(np.array_equal(mlx_w_to_pt_convt(w, g), p["w"]), name + ": weight map inverse")
        ref = to_cl(ref)
    args = geometry_args(p) + ["--layout", layout, "--x", save("x.npy", x.astype(dtype)),
                               "--w", save("w.npy", w.astype(dtype))] + list(extra)
    if b is not None:
        args += ["--bias", save("b.npy", b.astype(dtype))]
    y = run_ok(name, args, path("y.npy"))
    return close(name, y, ref, rtol)


def expect_error(name, args, code, operation=None, desc_contains=()):
    out = path("err_y.npy")
    r = xconv("run", *args, "--out", out)
    check(r.returncode == code, "%s: exit %d, expected %d (stderr %r)" % (name, r.returncode,
                                                                           code, r.stderr))
    m = ERROR_LINE.match(r.stderr)
    check(m is not None, "%s: stderr is not one error line: %r" % (name, r.stderr))
    if m and operation is not None:
        check(m.group(1) == operation or m.group(1).startswith(operation),
              "%s: operation %r, expected %r" % (name, m.group(1), operation))
    for s in desc_contains:
        check(m is not None and s in m.group(2),
              "%s: description %r lacks %r" % (name, m.group(2) if m else None, s))
    check(not os.path.exists(out), name + ": output file exists after an error")
    check(not [f for f in os.listdir(TMP) if ".tmp." in f], name + ": temporary file left")
    check(r.stdout == "", name + ": printed on stdout")


# ---------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------

def test_random_problems():
    rng = np.random.default_rng(1234)
    for op in ("conv", "conv_transpose"):
        for d in (1, 2, 3):
            for i, (groups, layout) in enumerate([(1, "channels_first"), (2, "channels_first"),
                                                  (1, "channels_last"), (3, "channels_last")]):
                p = random_problem(rng, op, d, groups=groups, bias=i % 2 == 0)
                run_problem("%s %dd g%d %s" % (op, d, groups, layout), p, layout)


def test_named_problems():
    rng = np.random.default_rng(7)
    # Depthwise 2-D with stride and dilation.
    p = dict(op="conv", x=rng.standard_normal((2, 4, 9, 8)), w=rng.standard_normal((4, 1, 3, 3)),
             b=rng.standard_normal(4), stride=[2, 1], lo=[1, 2], hi=[1, 2], dil=[1, 2],
             opad=[0, 0], groups=4)
    run_problem("depthwise conv2d", p)
    run_problem("depthwise conv2d channels_last", p, "channels_last")
    # Audio-style upsampling transpose, stride 4, output padding 3.
    p = dict(op="conv_transpose", x=rng.standard_normal((1, 6, 10)),
             w=rng.standard_normal((6, 2, 8)), b=rng.standard_normal(4), stride=[4], lo=[2],
             hi=[2], dil=[1], opad=[3], groups=2)
    run_problem("conv_transpose1d s4 op3", p)
    run_problem("conv_transpose1d s4 op3 channels_last", p, "channels_last")
    # 3-D patch embedding: kernel == stride.
    p = dict(op="conv", x=rng.standard_normal((1, 3, 4, 8, 8)),
             w=rng.standard_normal((5, 3, 2, 4, 4)), b=None, stride=[2, 4, 4], lo=[0] * 3,
             hi=[0] * 3, dil=[1] * 3, opad=[0] * 3, groups=1)
    run_problem("conv3d patch", p)
    # f32 files computed in f32: the f64 oracle within f32 accuracy.
    p = random_problem(rng, "conv", 2, groups=2)
    run_problem("conv2d f32", p, dtype=np.float32, rtol=1e-4)
    p = random_problem(rng, "conv_transpose", 2)
    run_problem("conv_transpose2d f32 channels_last", p, "channels_last", np.float32, 1e-4)
    # The same problems through the reference engine, forced.
    p = random_problem(rng, "conv_transpose", 3, groups=2)
    run_problem("conv_transpose3d --engine cpu.ref", p, extra=["--engine", "cpu.ref"])
    # cpu.winograd runs only with --allow-tf32 (f32, 3x3 stride 1), and is then within f32
    # accuracy of the f64 oracle.
    p = dict(op="conv", x=rng.standard_normal((2, 6, 9, 7)), w=rng.standard_normal((5, 6, 3, 3)),
             b=rng.standard_normal(5), stride=[1, 1], lo=[1, 0], hi=[1, 2], dil=[1, 1],
             opad=[0, 0], groups=1)
    run_problem("conv2d --engine cpu.winograd --allow-tf32", p, "channels_last", np.float32, 1e-4,
                extra=["--engine", "cpu.winograd", "--allow-tf32"])


def test_asymmetric_padding():
    rng = np.random.default_rng(11)
    for op, d in (("conv", 1), ("conv", 2), ("conv", 3), ("conv_transpose", 1),
                  ("conv_transpose", 2), ("conv_transpose", 3)):
        p = random_problem(rng, op, d, groups=1 if d != 2 else 2)
        if op == "conv":
            p["lo"] = [int(rng.integers(0, 3)) for _ in range(d)]
            p["hi"] = [int(rng.integers(0, 3)) for _ in range(d)]
        else:
            p["x"] = rng.standard_normal(p["x"].shape[:2] + (4,) * d)
            p["lo"] = [int(rng.integers(0, 2)) for _ in range(d)]
            p["hi"] = [int(rng.integers(0, 3)) for _ in range(d)]
        p["lo"][0], p["hi"][0] = 0, 2  # at least one dim truly asymmetric
        run_problem("asymmetric %s %dd" % (op, d), p)
        run_problem("asymmetric %s %dd channels_last" % (op, d), p, "channels_last")


def test_mlx_conv_transpose_definition():
    """Channels-last conv_transpose against MLX's own definition (flipped, input-dilated conv),
    independent of the weight map used elsewhere."""
    rng = np.random.default_rng(5)
    for d, g in ((1, 1), (2, 2), (3, 1)):
        cin, cout = 2 * g, 3 * g
        x = rng.standard_normal((1,) + (4,) * d + (cin,))
        w = rng.standard_normal((cout,) + (3,) * d + (cin // g,))
        stride, pad, dil = [2] * d, [1] * d, [1] * d
        ref = mlx_convt_flipped(x, w, stride, pad, dil, g)
        y = run_ok("mlx conv_transpose %dd" % d,
                   ["--op", "conv_transpose", "--layout", "channels_last", "--stride", "2",
                    "--padding", "1", "--groups", g, "--x", save("x.npy", x),
                    "--w", save("w.npy", w)], path("y.npy"))
        close("mlx conv_transpose %dd" % d, y, ref, 1e-12)


def test_dtypes():
    rng = np.random.default_rng(99)
    # i8 x i8 -> i32, exact, against integer sums (float64 is exact far below 2^53).
    x = rng.integers(-128, 128, (2, 4, 7, 6)).astype(np.int8)
    w = rng.integers(-128, 128, (6, 2, 3, 3)).astype(np.int8)
    b = rng.integers(-1000, 1000, 6).astype(np.int32)
    ref = np.rint(conv_oracle(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                              [1, 2], [1, 0], [1, 0], [1, 1], 2)).astype(np.int64)
    y = run_ok("i8->i32", ["--op", "conv", "--x", save("x.npy", x), "--w", save("w.npy", w),
                           "--bias", save("b.npy", b), "--stride", "1,2", "--padding", "1,0",
                           "--groups", 2, "--out-dtype", "i32"], path("y.npy"))
    if check(y is not None and y.dtype == np.dtype("<i4"), "i8->i32: output dtype"):
        check(np.array_equal(y.astype(np.int64), ref), "i8->i32: not exact")

    # int64 files converted to i8 by --dtype; conv_transpose exact.
    x = rng.integers(-128, 128, (1, 4, 5)).astype(np.int64)
    w = rng.integers(-128, 128, (4, 3, 4)).astype(np.int64)
    ref = np.rint(convt_oracle(x.astype(float), w.astype(float), None, [3], [1], [1], [1], [2],
                               1)).astype(np.int64)
    y = run_ok("i64 file --dtype i8 -> i64", ["--op", "conv_transpose", "--x", save("x.npy", x),
                                              "--w", save("w.npy", w), "--stride", 3,
                                              "--padding", 1, "--output-padding", 2,
                                              "--dtype", "i8", "--out-dtype", "i64"],
               path("y.npy"))
    if check(y is not None and y.dtype == np.dtype("<i8"), "--dtype i8 -> i64: output dtype"):
        check(np.array_equal(y, ref), "--dtype i8 -> i64: not exact")

    # u8 -> u32 exact.
    x = rng.integers(0, 256, (1, 3, 9)).astype(np.uint8)
    w = rng.integers(0, 256, (2, 3, 4)).astype(np.uint8)
    ref = np.rint(conv_oracle(x.astype(float), w.astype(float), None, [1], [0], [0], [2], 1))
    y = run_ok("u8->u32", ["--op", "conv", "--x", save("x.npy", x), "--w", save("w.npy", w),
                           "--dilation", 2, "--out-dtype", "u32"], path("y.npy"))
    if check(y is not None and y.dtype == np.dtype("<u4"), "u8->u32: output dtype"):
        check(np.array_equal(y.astype(np.int64), ref.astype(np.int64)), "u8->u32: not exact")

    # Integer-valued floats convert exactly to an integer dtype.
    xf = rng.integers(-50, 50, (1, 2, 6)).astype(np.float32)
    wf = rng.integers(-50, 50, (3, 2, 2)).astype(np.float64)
    ref = np.rint(conv_oracle(xf.astype(float), wf, None, [1], [0], [0], [1], 1)).astype(np.int64)
    y = run_ok("float files --dtype i16 -> i64", ["--op", "conv", "--x", save("x.npy", xf),
                                                  "--w", save("w.npy", wf), "--dtype", "i16",
                                                  "--out-dtype", "i64"], path("y.npy"))
    if y is not None:
        check(np.array_equal(y, ref), "--dtype i16: not exact")

    # bf16: written as f32; every value a bf16; within bf16 rounding of the f64 oracle on
    # bf16-rounded inputs.
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    xb = torch.from_numpy(x).to(torch.bfloat16).to(torch.float64).numpy()
    wb = torch.from_numpy(w).to(torch.bfloat16).to(torch.float64).numpy()
    ref = conv_oracle(xb, wb, None, [1, 1], [1, 1], [1, 1], [1, 1], 1)
    y = run_ok("bf16", ["--op", "conv", "--x", save("x.npy", x), "--w", save("w.npy", w),
                        "--padding", 1, "--dtype", "bf16"], path("y.npy"))
    if check(y is not None and y.dtype == np.dtype("<f4"), "bf16: written as f32"):
        check(np.all(y.view(np.uint32) & 0xFFFF == 0), "bf16: values are not bf16")
        # One rounding to bf16 (2^-9 relative) plus f32 accumulation.
        check(np.all(np.abs(y - ref) <= 2.0 ** -8 * np.abs(ref) + 1e-5 * np.max(np.abs(ref))),
              "bf16: beyond one rounding of the oracle")

    # f16 with an f32 result.
    xh = x.astype(np.float16)
    wh = w.astype(np.float16)
    ref = conv_oracle(xh.astype(float), wh.astype(float), None, [2, 2], [0, 0], [0, 0], [1, 1], 1)
    y = run_ok("f16->f32", ["--op", "conv", "--x", save("x.npy", xh), "--w", save("w.npy", wh),
                            "--stride", 2, "--out-dtype", "f32"], path("y.npy"))
    if check(y is not None and y.dtype == np.dtype("<f4"), "f16->f32: dtype"):
        close("f16->f32", y, ref, 1e-5)

    # f8e4m3 result written widened to f32: every value representable in e4m3.
    y = run_ok("f8e4m3", ["--op", "conv", "--x", save("x.npy", x * 0.25),
                          "--w", save("w.npy", w * 0.25), "--dtype", "f8e4m3"], path("y.npy"))
    if check(y is not None and y.dtype == np.dtype("<f4"), "f8e4m3: written as f32"):
        # e4m3: 3 mantissa bits, so v * 2^(3 - floor(log2|v|)) is an integer (normals).
        v = y[(y != 0) & (np.abs(y) >= 2.0 ** -6)].astype(np.float64)
        e = np.floor(np.log2(np.abs(v)))
        check(np.all(v * 2.0 ** (3 - e) == np.rint(v * 2.0 ** (3 - e))) and
              np.all(np.abs(y) <= 448), "f8e4m3: values not representable")
    # --allow-fp8-fast-accum is a plan option for the GPU's fp8 tensor cores: the CPU engines
    # sum fp8 in f32 either way, so y is the same to the bit.
    y2 = run_ok("f8e4m3 --allow-fp8-fast-accum",
                ["--op", "conv", "--x", save("x.npy", x * 0.25), "--w", save("w.npy", w * 0.25),
                 "--dtype", "f8e4m3", "--allow-fp8-fast-accum"], path("y2.npy"))
    check(y is not None and y2 is not None and np.array_equal(y.view(np.uint32), y2.view(np.uint32)),
          "f8e4m3: --allow-fp8-fast-accum changed a CPU result")

    # c128: complex conv against four real convolutions.
    xc = rng.standard_normal((1, 2, 7)) + 1j * rng.standard_normal((1, 2, 7))
    wc = rng.standard_normal((3, 2, 3)) + 1j * rng.standard_normal((3, 2, 3))

    def cc(a, b):
        return conv_oracle(a, b, None, [1], [1], [1], [1], 1)
    ref = (cc(xc.real, wc.real) - cc(xc.imag, wc.imag)) + 1j * (cc(xc.real, wc.imag) +
                                                                cc(xc.imag, wc.real))
    y = run_ok("c128", ["--op", "conv", "--x", save("x.npy", xc), "--w", save("w.npy", wc),
                        "--padding", 1], path("y.npy"))
    if check(y is not None and y.dtype == np.dtype("<c16"), "c128: dtype"):
        close("c128", y, ref, 1e-12)
    y = run_ok("c64", ["--op", "conv", "--x", save("x.npy", xc), "--w", save("w.npy", wc),
                       "--padding", 1, "--dtype", "c64"], path("y.npy"))
    if check(y is not None and y.dtype == np.dtype("<c8"), "c64: dtype"):
        close("c64", y, ref, 1e-5)

    # f32 files computed in f64: the conversion is exact.
    x32 = rng.standard_normal((1, 2, 6)).astype(np.float32)
    w32 = rng.standard_normal((2, 2, 3)).astype(np.float32)
    ref = conv_oracle(x32.astype(float), w32.astype(float), None, [1], [0], [0], [1], 1)
    y = run_ok("f32 --dtype f64", ["--op", "conv", "--x", save("x.npy", x32),
                                   "--w", save("w.npy", w32), "--dtype", "f64"], path("y.npy"))
    if check(y is not None and y.dtype == np.dtype("<f8"), "f32 --dtype f64: dtype"):
        close("f32 --dtype f64", y, ref, 1e-14)


def test_file_formats():
    rng = np.random.default_rng(3)
    # No unit dims, so that Fortran order really differs from C order.
    p = dict(op="conv", x=rng.standard_normal((2, 3, 6, 5)), w=rng.standard_normal((4, 3, 3, 2)),
             b=rng.standard_normal(4), stride=[2, 1], lo=[1, 0], hi=[1, 0], dil=[1, 2],
             opad=[0, 0], groups=1)
    ref = oracle(p)
    base = geometry_args(p)
    # Fortran order for x and w, and big-endian data.
    for name, conv in (("fortran", np.asfortranarray), ("big-endian", lambda a: a.astype(">f8"))):
        xa, wa = conv(p["x"]), conv(p["w"])
        if name == "fortran":
            check(np.isfortran(xa) and np.isfortran(wa), "fortran: test arrays are F-ordered")
        args = base + ["--x", save("x.npy", xa), "--w", save("w.npy", wa),
                       "--bias", save("b.npy", p["b"])]
        close(name, run_ok(name, args, path("y.npy")), ref, 1e-12)
    # A Fortran-order int32 file converted to i16.
    xi = np.asfortranarray(rng.integers(-100, 100, p["x"].shape).astype(np.int32))
    wi = np.asfortranarray(rng.integers(-100, 100, p["w"].shape).astype(np.int32))
    refi = np.rint(conv_oracle(xi.astype(float), wi.astype(float), None, p["stride"], p["lo"],
                               p["hi"], p["dil"], 1)).astype(np.int64)
    y = run_ok("fortran i32 --dtype i16", base + ["--x", save("x.npy", xi), "--w",
                                                  save("w.npy", wi), "--dtype", "i16",
                                                  "--out-dtype", "i64"], path("y.npy"))
    if y is not None:
        check(np.array_equal(y, refi), "fortran i32 --dtype i16: not exact")
    # Format versions 2.0 and 3.0.
    for version in ((2, 0), (3, 0)):
        args = base + ["--x", save("x.npy", p["x"], version), "--w", save("w.npy", p["w"], version),
                       "--bias", save("b.npy", p["b"], version)]
        close("npy %d.%d" % version, run_ok("npy %d.%d" % version, args, path("y.npy")), ref, 1e-12)
    # Threads: the same bytes for 1 and 2 threads.
    args = base + ["--x", save("x.npy", p["x"]), "--w", save("w.npy", p["w"])]
    o1, o2 = path("y1.npy"), path("y2.npy")
    r1 = xconv("run", *args, "--threads", 1, "--out", o1)
    r2 = xconv("run", *args, "--threads", 2, "--out", o2)
    if check(r1.returncode == 0 and r2.returncode == 0, "threads: runs failed"):
        check(open(o1, "rb").read() == open(o2, "rb").read(), "threads: results differ")
    # -v prints the problem and the engine on stdout.
    r = xconv("run", *args, "-v", "--out", path("y.npy"))
    check(r.returncode == 0 and "conv2d" in r.stdout and "engine" in r.stdout,
          "-v: %r" % r.stdout)
    # N = 0 is valid and writes an empty array of the right shape.
    x0 = np.zeros((0,) + p["x"].shape[1:])
    y = run_ok("n0", base + ["--x", save("x.npy", x0), "--w", save("w.npy", p["w"])],
               path("y.npy"))
    check(y is not None and y.shape == (0,) + ref.shape[1:], "n0: shape")


def malformed_files():
    good = io.BytesIO()
    np.save(good, np.ones((1, 2, 3)))
    good = good.getvalue()
    hlen = good[8] | good[9] << 8
    data = good[10 + hlen:]

    def with_header(h):
        h = h + b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
        return b"\x93NUMPY\x01\x00" + bytes([len(h) & 255, len(h) >> 8]) + h + data

    return {
        "empty": b"",
        "bad magic": b"\x93NUMPX" + good[6:],
        "truncated data": good[:-5],
        "trailing bytes": good + b"\x00" * 8,
        "truncated header": good[:20],
        "bad version": good[:6] + b"\x04\x00" + good[8:],
        "header length past end": good[:8] + b"\xff\xff" + good[10:],
        "object dtype": with_header(b"{'descr': '|O', 'fortran_order': False, 'shape': (1, 2, 3), }"),
        "structured dtype": with_header(b"{'descr': [('a', '<f8')], 'fortran_order': False, "
                                        b"'shape': (1, 2, 3), }"),
        "missing shape": with_header(b"{'descr': '<f8', 'fortran_order': False, }"),
        "shape mismatch": with_header(b"{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 4), }"),
        "negative dim": with_header(b"{'descr': '<f8', 'fortran_order': False, 'shape': (1, -2, 3), }"),
        "not a dict": with_header(b"['<f8', False, (1, 2, 3)]"),
        "bad bool": with_header(b"{'descr': '<f8', 'fortran_order': 0, 'shape': (1, 2, 3), }"),
        "huge shape": with_header(b"{'descr': '<f8', 'fortran_order': False, "
                                  b"'shape': (4294967296, 4294967296, 4294967296), }"),
        "unterminated": with_header(b"{'descr': '<f8, 'fortran_order': False"),
        "duplicate key": with_header(b"{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, "
                                     b"'shape': (1, 2, 3), }"),
        "extra key": with_header(b"{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 3), "
                                 b"'x': 1}"),
        "long double": with_header(b"{'descr': '<f16', 'fortran_order': False, 'shape': (1, 2, 3), }"),
    }


def test_errors():
    rng = np.random.default_rng(17)
    x8 = save("x8.npy", rng.standard_normal((1, 8, 5, 5)))
    w8 = save("w8.npy", rng.standard_normal((6, 8, 3, 3)))
    w_g3 = save("w_g3.npy", rng.standard_normal((6, 2, 3, 3)))
    conv = ["--op", "conv"]
    expect_error("groups 3 of 8 channels", conv + ["--x", x8, "--w", w_g3, "--groups", 3], 2,
                 "xconv_", ["groups 3", "8"])
    expect_error("zero stride", conv + ["--x", x8, "--w", w8, "--stride", 0], 2, "xconv_",
                 ["stride"])
    expect_error("negative padding", conv + ["--x", x8, "--w", w8, "--padding", "-1"], 2, "xconv_",
                 ["pad"])
    expect_error("input too small", conv + ["--x", x8, "--w", save("wbig.npy", np.ones((6, 8, 9, 9)))],
                 2, "xconv_")
    expect_error("weight channels", conv + ["--x", x8, "--w", save("w7.npy", np.ones((6, 7, 3, 3)))],
                 2, "xconv_")
    expect_error("output padding on conv", conv + ["--x", x8, "--w", w8, "--output-padding", 1],
                 2, "xconv_")
    expect_error("output padding too large", ["--op", "conv_transpose", "--x", x8, "--w",
                                              save("wt.npy", np.ones((8, 2, 3, 3))),
                                              "--stride", 2, "--output-padding", 2], 2, "xconv_")
    expect_error("out dtype not wider", conv + ["--x", x8, "--w", w8, "--out-dtype", "i32"], 2,
                 "xconv_")
    # Values that do not convert.
    xi = save("x300.npy", np.full((1, 8, 5, 5), 300, np.int16))
    wi = save("wi.npy", np.ones((6, 8, 3, 3), np.int16))
    expect_error("i16 300 -> i8", conv + ["--x", xi, "--w", wi, "--dtype", "i8"], 2,
                 "read " + xi, ["300", "i8"])
    xf = save("xfrac.npy", np.full((1, 8, 5, 5), 1.5))
    expect_error("1.5 -> i32", conv + ["--x", xf, "--w", wi, "--dtype", "i32"], 2, "read " + xf,
                 ["1.5", "i32"])
    xneg = save("xneg.npy", np.full((1, 8, 5, 5), -1, np.int8))
    expect_error("-1 -> u8", conv + ["--x", xneg, "--w", wi, "--dtype", "u8"], 2, "read " + xneg,
                 ["-1", "u8"])
    xnan = save("xnan.npy", np.full((1, 8, 5, 5), np.nan))
    expect_error("nan -> i64", conv + ["--x", xnan, "--w", wi, "--dtype", "i64"], 2,
                 "read " + xnan)
    xcplx = save("xc.npy", np.full((1, 8, 5, 5), 1 + 2j))
    expect_error("complex -> f32", conv + ["--x", xcplx, "--w", w8, "--dtype", "f32"], 2,
                 "read " + xcplx, ["imaginary"])
    # Malformed files.
    for name, blob in malformed_files().items():
        p = path("bad.npy")
        with open(p, "wb") as f:
            f.write(blob)
        expect_error("malformed npy: " + name, conv + ["--x", p, "--w", w8], 2, "read " + p)
    xb = save("xbool.npy", np.ones((1, 8, 5, 5), bool))
    expect_error("bool file", conv + ["--x", xb, "--w", w8, "--dtype", "f64"], 2, "read " + xb,
                 ["bool"])
    # CLI arguments.
    expect_error("unknown option", conv + ["--x", x8, "--w", w8, "--strid", 1], 2, "run")
    expect_error("missing --w", conv + ["--x", x8], 2, "run", ["--w"])
    expect_error("bad op", ["--op", "deconv", "--x", x8, "--w", w8], 2, "run", ["deconv"])
    expect_error("bad padding", conv + ["--x", x8, "--w", w8, "--padding", "1:"], 2, "run",
                 ["padding"])
    expect_error("wrong list length", conv + ["--x", x8, "--w", w8, "--stride", "1,1,1"], 2, "run",
                 ["stride"])
    expect_error("bad dtype", conv + ["--x", x8, "--w", w8, "--dtype", "f128"], 2, "run", ["f128"])
    expect_error("bad layout", conv + ["--x", x8, "--w", w8, "--layout", "nchw"], 2, "run")
    expect_error("bad engine", conv + ["--x", x8, "--w", w8, "--engine", "gpu.magic"], 2, "run",
                 ["gpu.magic"])
    expect_error("bad threads", conv + ["--x", x8, "--w", w8, "--threads", "-1"], 2, "run")
    expect_error("rank mismatch", conv + ["--x", x8, "--w", save("w1d.npy", np.ones((6, 8, 3)))],
                 2, "run")
    expect_error("rank 2 x", conv + ["--x", save("x2.npy", np.ones((2, 3))), "--w", w8], 2, "run")
    # Not validation errors: exit 1. A forced engine that cannot run a dense conv (when the
    # build has a depthwise engine) is UNSUPPORTED.
    caps = xconv("caps").stdout.splitlines()
    if caps and "cpu.depthwise" in caps[0].split():
        expect_error("forced engine unsupported",
                     conv + ["--x", x8, "--w", w8, "--engine", "cpu.depthwise"], 1, "xconv_")
    if caps and "cpu.winograd" in caps[0].split():
        expect_error("cpu.winograd without --allow-tf32",
                     conv + ["--x", x8, "--w", w8, "--dtype", "f32", "--engine", "cpu.winograd"], 1,
                     "xconv_", ["cpu.winograd", "allow_tf32"])
    missing = os.path.join(TMP, "does_not_exist.npy")
    expect_error("missing file", conv + ["--x", missing, "--w", w8], 1, "read " + missing)
    out_dir_missing = os.path.join(TMP, "no_such_dir", "y.npy")
    r = xconv("run", *conv, "--x", x8, "--w", w8, "--out", out_dir_missing)
    check(r.returncode == 1 and ERROR_LINE.match(r.stderr) is not None,
          "unwritable output: exit %d, %r" % (r.returncode, r.stderr))
    check(not os.path.exists(out_dir_missing), "unwritable output: file exists")


def test_other_commands():
    r = xconv("--help")
    check(r.returncode == 0 and "run" in r.stdout and "caps" in r.stdout, "--help")
    r = xconv("run", "--help")
    check(r.returncode == 0 and "--output-padding" in r.stdout, "run --help")
    r = xconv("version")
    check(r.returncode == 0 and re.match(r"^xconv \d+\.\d+\.\d+\n$", r.stdout), "version %r" % r.stdout)
    r = xconv()
    check(r.returncode == 2 and ERROR_LINE.match(r.stderr), "no command: %r" % r.stderr)
    r = xconv("frobnicate")
    check(r.returncode == 2 and ERROR_LINE.match(r.stderr), "unknown command: %r" % r.stderr)
    r = xconv("caps")
    check(r.returncode == 0, "caps exit %d: %s" % (r.returncode, r.stderr))
    rows = [l for l in r.stdout.splitlines() if re.match(r"^conv(_transpose)? ", l)]
    check(len(rows) >= 2 * 16 * 2, "caps: %d rows" % len(rows))
    check(all("cpu.ref" in l for l in rows if " cpu " in l), "caps: cpu.ref missing from a cpu row")
    check(all(("(" not in l.split()[4]) for l in rows if " cpu " in l), "caps: a planner error")
    r = xconv("demo")
    check(r.returncode == 0, "demo exit %d: %s" % (r.returncode, r.stderr[-2000:]))
    check("0 failed" in r.stdout and "FAILED" not in r.stdout and "MISMATCH" not in r.stdout,
          "demo output: %s" % r.stdout[-2000:])
    for dt in ("f32", "bf16", "f16", "i8 -> i32", "i64", "c64"):
        check(dt in r.stdout, "demo lacks dtype %s" % dt)


def test_bench_device():
    """`bench --device cuda` without a usable GPU (no CUDA backend, no driver, no device):
    one error line naming the reason, exit 2, nothing on stdout. With a GPU the device check
    passes and the filter that matches nothing gives exit 2 too, before any timing."""
    r = xconv("bench", "--device", "cuda", "--filter", "no_such_entry_xyz")
    if r.returncode == 1 and "not built into" in r.stderr:
        return  # a build without the bench (no cJSON)
    check(r.returncode == 2, "bench --device cuda: exit %d (%r)" % (r.returncode, r.stderr))
    m = ERROR_LINE.match(r.stderr)
    check(m is not None, "bench --device cuda: stderr is not one error line: %r" % r.stderr)
    check(r.stdout == "", "bench --device cuda: printed on stdout: %r" % r.stdout[:200])
    if m and not os.path.exists("/dev/nvidiactl"):
        check(m.group(2).startswith("--device cuda: ") and
              ("no usable CUDA device" in m.group(2) or "no CUDA backend" in m.group(2)),
              "bench --device cuda: description %r" % m.group(2))
    r = xconv("bench", "--device", "tpu")
    check(r.returncode == 2 and ERROR_LINE.match(r.stderr) is not None and
          "--device tpu must be cpu or cuda" in r.stderr, "bench --device tpu: %r" % r.stderr)


def main():
    if not os.path.exists(XCONV):
        print("no xconv binary at", XCONV, file=sys.stderr)
        print("test_cli: 0 passed, 1 failed")
        return 1
    for t in (test_random_problems, test_named_problems, test_asymmetric_padding,
              test_mlx_conv_transpose_definition, test_dtypes, test_file_formats, test_errors,
              test_other_commands, test_bench_device):
        try:
            t()
        except Exception as e:  # a crash of one group must not hide the others' results
            import traceback
            traceback.print_exc()
            check(False, "%s raised %r" % (t.__name__, e))
    print("test_cli: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

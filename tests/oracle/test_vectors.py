"""Outside test vectors (shared/vectors, transcribed from MLX's and ggml's test suites).

    /usr/bin/python3 tests/oracle/test_vectors.py [BUILD_DIR]

The vectors are found through XCONV_VECTORS, else at <repo>/../shared/vectors.

  * mlx_fixed_cases.json, ggml_cases.json: every case against its own expected values and
    tolerances (flip: true = true convolution; float16 inputs rounded, computed in f32 or
    through our f16 dtype), in f32 and f64, and the MLX channels-last originals (MLX weight
    convention) against their channels-last expectations.
  * mlx_grids.json, ggml_grids.json: every problem expanded with seeded random data and
    compared with PyTorch in float64 (MLX's gradient grids also check the input and weight
    gradients, computed by our conv_transpose and conv, against torch autograd).

Ends with "test_vectors: N passed, N failed".
"""

import json
import os
import sys

import numpy as np

import common
from common import Problem

SEED = 7


def vectors_dir():
    env = os.environ.get("XCONV_VECTORS")
    if env:
        return env
    return os.path.join(os.path.dirname(common.REPO), "shared", "vectors")


def parse_op(name):
    """'conv_transpose2d' -> ('conv_transpose', 2)."""
    return ("conv_transpose" if name.startswith("conv_transpose") else "conv"), int(name[-2])


def per_dim(v, d):
    return [int(v)] * d if np.isscalar(v) else [int(a) for a in v]


def problem(op, d, stride=1, padding=0, dilation=1, output_padding=0, groups=1, lo=None,
            hi=None):
    pad = per_dim(padding, d)
    return Problem(op, d, per_dim(stride, d), per_dim(dilation, d),
                   lo if lo is not None else pad, hi if hi is not None else pad,
                   per_dim(output_padding, d) if op == "conv_transpose" else [0] * d, groups)


def flip_spatial(w, axes):
    return np.flip(w, axis=tuple(axes)).copy()


class Tester:
    def __init__(self, xconv, torch, counter):
        self.xconv, self.torch, self.c = xconv, torch, counter

    # -----------------------------------------------------------------------------------
    # Fixed cases with expected values
    # -----------------------------------------------------------------------------------

    def fixed(self, case):
        op, d = parse_op(case["op"])
        prm = case["params"]
        p = problem(op, d, prm.get("stride", 1), prm.get("padding", 0), prm.get("dilation", 1),
                    prm.get("output_padding", 0), prm.get("groups", 1))
        flip = bool(prm.get("flip", False))
        tol = case.get("tolerance") or 0.0
        rtol = case.get("relative_tolerance") or 0.0
        if case.get("decimals") is not None:
            tol += 0.5 * 10.0 ** -case["decimals"]
        x_f16 = case.get("x_dtype") == "float16"
        w_f16 = case.get("w_dtype") == "float16"

        def prep(x, w):
            """The dtype variants to run: (label, x, w, dtype, out_dtype)."""
            if x_f16 and w_f16:
                runs = [("f16->f32", x.astype(np.float16), w.astype(np.float16), None, "f32")]
                if case.get("output_dtype") == "float16":
                    runs.append(("f16->f16", x.astype(np.float16), w.astype(np.float16), None,
                                 "f16"))
                return runs
            if x_f16 or w_f16:  # the other operand stays f32: round the f16 one, run f32
                xr = x.astype(np.float16).astype(np.float32) if x_f16 else x.astype(np.float32)
                wr = w.astype(np.float16).astype(np.float32) if w_f16 else w.astype(np.float32)
                return [("f32 (f16-rounded input)", xr, wr, None, None)]
            return [("f32", x.astype(np.float32), w.astype(np.float32), None, None),
                    ("f64", x.astype(np.float64), w.astype(np.float64), None, None)]

        x = np.array(case["x"], dtype=np.float64).reshape(case["x_shape"])
        w = np.array(case["w"], dtype=np.float64).reshape(case["w_shape"])
        want = np.array(case["expected"], dtype=np.float64).reshape(case["expected_shape"])
        if flip:
            w = flip_spatial(w, range(2, 2 + d))
        for label, xr, wr, dt, odt in prep(x, w):
            self.expect("%s [%s, channels_first]" % (case["name"], label), p, xr, wr,
                        "channels_first", want, tol, rtol, odt)
        cl = case.get("channels_last")
        if cl:
            x = np.array(cl["x"], dtype=np.float64).reshape(cl["x_shape"])
            w = np.array(cl["w"], dtype=np.float64).reshape(cl["w_shape_mlx"])
            want = np.array(cl["expected"], dtype=np.float64).reshape(cl["expected_shape"])
            if flip:
                w = flip_spatial(w, range(1, 1 + d))
            for label, xr, wr, dt, odt in prep(x, w):
                self.expect("%s [%s, channels_last MLX original]" % (case["name"], label), p,
                            xr, wr, "channels_last", want, tol, rtol, odt)

    def expect(self, desc, p, x, w, layout, want, tol, rtol, out_dtype):
        try:
            got = self.xconv.conv(x, w, layout=layout, out_dtype=out_dtype, **p.kwargs())
        except self.xconv.XconvError as e:
            self.c.ok(False, desc, "error %s" % e)
            return
        got = np.asarray(got, dtype=np.float64)
        if got.shape != want.shape:
            self.c.ok(False, desc, "shape %s, expected %s" % (got.shape, want.shape))
            return
        err = np.abs(got - want)
        bound = tol + rtol * np.abs(want)
        i = np.unravel_index(int(np.argmax(err - bound)), err.shape) if err.size else None
        self.c.ok(err.size == 0 or bool(np.all(err <= bound)), desc,
                  "" if i is None else "at %s got %r want %r (tol %g, rtol %g)" % (
                      tuple(int(a) for a in i), got[i], want[i], tol, rtol))

    # -----------------------------------------------------------------------------------
    # Grid problems against PyTorch float64
    # -----------------------------------------------------------------------------------

    def against_torch(self, desc, p, x_cf, w_pt, layout, dtype, bias=None):
        """Runs the problem (x_cf, w_pt channels-first values already in `dtype`) through
        the library in `layout` and compares with torch f64. Returns y (channels-first) or
        None. dtype: "f32", "f64", "bf16" (in and out), "f16w" (f16-rounded weight, f32)."""
        torch = self.torch
        want = common.torch_conv(torch, p, x_cf, w_pt, bias)
        scale = common.abs_sum(torch, p, x_cf, w_pt, bias)
        red = common.reduction_length(p, w_pt) + 2
        if layout == "channels_last":
            xl = np.ascontiguousarray(common.cf_to_cl(x_cf))
            wl = np.ascontiguousarray(common.w_pt_to_mlx(w_pt, p.op, p.groups))
        else:
            xl, wl = x_cf, w_pt
        kw = p.kwargs()
        if dtype == "bf16":
            args = dict(dtype="bf16")
            want = common.round_to(want, "bf16")
            tol = common.ulp(want, "bf16") + red * common.EPS["f32"] * scale
            xl, wl = xl.astype(np.float32), wl.astype(np.float32)
        else:
            npdt = np.float64 if dtype == "f64" else np.float32
            xl, wl = xl.astype(npdt), wl.astype(npdt)
            args = {}
            tol = 2 * red * common.EPS["f64" if dtype == "f64" else "f32"] * scale
        if bias is not None:
            bias = np.asarray(bias, dtype=xl.dtype)
        try:
            got = self.xconv.conv(xl, wl, bias, layout=layout, **args, **kw)
        except self.xconv.XconvError as e:
            self.c.ok(False, desc, "error %s" % e)
            return None
        if layout == "channels_last":
            got = common.cl_to_cf(got)
        got = np.asarray(got, dtype=np.float64)
        excess, where = common.max_excess(got, want, tol)
        self.c.ok(excess <= 0, desc, "excess %.3g %s" % (excess, where))
        return got

    def shape_check(self, desc, p, x_shape, w_shape, layout, out_shape):
        try:
            got = self.xconv.output_shape(x_shape, w_shape, layout=layout, **p.kwargs())
        except self.xconv.XconvError as e:
            self.c.ok(False, desc + " output_shape", "error %s" % e)
            return
        self.c.ok(list(got) == list(out_shape), desc + " output_shape",
                  "%s, the source says %s" % (list(got), list(out_shape)))

    def vjp(self, desc, rng, p, x, w, dtype):
        """Gradients of the problem's sum(y * cot): dx by the adjoint op (conv_transpose
        for conv, conv for conv_transpose), dw by a conv of x with the cotangent (stride and
        dilation trade places), both run by the library and checked against torch
        autograd in float64."""
        torch = self.torch
        xconv = self.xconv
        d = p.d
        X, K = list(x.shape[2:]), list(w.shape[2:])
        Y = p.out_size(X, K)
        cout = w.shape[0] if p.op == "conv" else w.shape[1] * p.groups
        cot = common.round_to(rng.standard_normal([x.shape[0], cout] + Y), "f32")
        xt = torch.tensor(x, requires_grad=True)
        wt = torch.tensor(w, requires_grad=True)
        common.torch_conv_t(torch, p, xt, wt).backward(torch.as_tensor(cot))
        dx_want, dw_want = xt.grad.numpy(), wt.grad.numpy()
        npdt = np.float64 if dtype == "f64" else np.float32
        dx_abs, dw_abs = self._abs_grads(p, x, w, cot)
        red_dx = cout * int(np.prod(K)) + 2
        red_dw = x.shape[0] * max(int(np.prod(Y)), int(np.prod(X))) + 2
        tol_dx = 2 * red_dx * common.EPS["f32"] * dx_abs
        tol_dw = 2 * red_dw * common.EPS["f32"] * dw_abs
        # dx: the adjoint op on the cotangent with the same weight tensor.
        kw = dict(stride=p.stride, dilation=p.dilation, padding=list(zip(p.lo, p.hi)),
                  groups=p.groups)
        try:
            if p.op == "conv":
                opad = [X[i] - ((Y[i] - 1) * p.stride[i] - p.lo[i] - p.hi[i]
                                + p.dilation[i] * (K[i] - 1) + 1) for i in range(d)]
                dx = xconv.conv_transpose(cot.astype(npdt), w.astype(npdt), output_padding=opad,
                                          **kw)
            else:
                dx = xconv.conv(cot.astype(npdt), w.astype(npdt), **kw)
                dx = dx[(slice(None), slice(None)) + tuple(slice(0, n) for n in X)]
            excess, where = common.max_excess(np.asarray(dx, np.float64), dx_want, tol_dx)
            self.c.ok(excess <= 0, desc + " dx", "excess %.3g %s" % (excess, where))
        except xconv.XconvError as e:
            self.c.ok(False, desc + " dx", "error %s" % e)
        # dw: conv of the input (channels as batch) with the gradient (batch as channels).
        if x.shape[0] == 0:
            return
        if p.op == "conv":
            inp, grad = x, cot
        else:
            inp, grad = cot, x
        try:
            dw = self.weight_grad(p, inp.astype(npdt), grad.astype(npdt), K)
            excess, where = common.max_excess(np.asarray(dw, np.float64), dw_want, tol_dw)
            self.c.ok(excess <= 0, desc + " dw", "excess %.3g %s" % (excess, where))
        except xconv.XconvError as e:
            self.c.ok(False, desc + " dw", "error %s" % e)

    def _abs_grads(self, p, x, w, cot):
        """The gradients' error scales: the same sums over absolute values."""
        torch = self.torch
        xt = torch.tensor(np.abs(x), requires_grad=True)
        wt = torch.tensor(np.abs(w), requires_grad=True)
        common.torch_conv_t(torch, p, xt, wt).backward(torch.as_tensor(np.abs(cot)))
        return xt.grad.numpy(), wt.grad.numpy()

    def weight_grad(self, p, inp, grad, K):
        """dw[co, c, k] = sum_n sum_o grad[n, co, o] * inp[n, G*cin_g + c, o*s + k*t - lo],
        as one grouped conv: input [cin_g, (G, n), A..], weight [(G, co), n, B..], stride t,
        dilation s, the same padding; its first K outputs per dim are dw [Co, cin_g, K..]."""
        g = p.groups
        n, ci = inp.shape[:2]
        co = grad.shape[1]
        A, B = list(inp.shape[2:]), list(grad.shape[2:])
        d = p.d
        ci_g, co_g = ci // g, co // g
        xs = inp.reshape([n, g, ci_g] + A).transpose([2, 1, 0] + list(range(3, 3 + d)))
        xs = np.ascontiguousarray(xs).reshape([ci_g, g * n] + A)
        ws = grad.reshape([n, g, co_g] + B).transpose([1, 2, 0] + list(range(3, 3 + d)))
        ws = np.ascontiguousarray(ws).reshape([g * co_g, n] + B)
        y = self.xconv.conv(xs, ws, stride=p.dilation, dilation=p.stride,
                            padding=list(zip(p.lo, p.hi)), groups=g)
        y = y[(slice(None), slice(None)) + tuple(slice(0, k) for k in K)]
        return np.ascontiguousarray(np.swapaxes(y, 0, 1))


# ---------------------------------------------------------------------------------------
# The files
# ---------------------------------------------------------------------------------------

def mlx_grids(t, data, rng):
    for grid in data["grids"]:
        name = grid["test"]
        for i, case in enumerate(grid["cases"]):
            desc = "%s #%d" % (name, i)
            if case["op"] == "conv_general":
                mlx_conv_general(t, desc, case, rng)
                continue
            op, d = parse_op(case["op"])
            p = problem(op, d, case["stride"], case["padding"], case["dilation"],
                        case["output_padding"], case["groups"])
            t.shape_check(desc, p, case["x_shape_channels_last"], case["w_shape_mlx"],
                          "channels_last", case["out_shape_channels_last"])
            t.shape_check(desc, p, case["x_shape_channels_first"], case["w_shape_torch"],
                          "channels_first", case["out_shape_channels_first"])
            dtype = "bf16" if case.get("dtype") == "bfloat16" else "f32"
            fmt = "bf16" if dtype == "bf16" else "f32"
            x = common.random_in_format(rng, case["x_shape_channels_first"], fmt)
            w_mlx = common.random_in_format(rng, case["w_shape_mlx"], fmt,
                                            scale=1 / np.sqrt(np.prod(case["w_shape_mlx"][1:])))
            if case.get("flip"):
                w_mlx = flip_spatial(w_mlx, range(1, 1 + d))
            w = common.w_mlx_to_pt(w_mlx, op, p.groups)
            # MLX's own form first (channels_last, MLX weight), then channels_first.
            t.against_torch(desc + " channels_last", p, x, w, "channels_last", dtype)
            if i % 2 == 0:
                t.against_torch(desc + " channels_first", p, x, w, "channels_first", dtype)
            if grid["kind"] == "backward":
                t.vjp(desc, rng, p, x, w, dtype)


def mlx_conv_general(t, desc, case, rng):
    """conv_general with input dilation: zero-insert the input (MLX's definition), flip the
    kernel if asked, then a plain conv."""
    x = common.random_in_format(rng, case["x_shape_channels_last"], "f32", scale=0.3)
    w_mlx = common.random_in_format(rng, case["w_shape_mlx"], "f32", scale=0.3)
    d = x.ndim - 2
    idil = per_dim(case["input_dilation"], d)
    X = list(x.shape[1:-1])
    xd = np.zeros([x.shape[0]] + [(X[i] - 1) * idil[i] + 1 for i in range(d)] + [x.shape[-1]])
    xd[(slice(None),) + tuple(slice(None, None, idil[i]) for i in range(d))] = x
    if case.get("flip"):
        w_mlx = flip_spatial(w_mlx, range(1, 1 + d))
    p = problem("conv", d, case["stride"], case["padding"], case["kernel_dilation"], 0,
                case.get("groups", 1))
    t.shape_check(desc, p, list(xd.shape), case["w_shape_mlx"], "channels_last",
                  case["out_shape_channels_last"])
    w = common.w_mlx_to_pt(w_mlx, "conv", p.groups)
    t.against_torch(desc + " channels_last", p, common.cl_to_cf(xd), w, "channels_last", "f32")


def ggml_grids(t, data, rng):
    for grid in data["grids"]:
        name = grid["test"]
        op, d = parse_op(grid["op"].split()[0])
        for i, case in enumerate(grid["cases"]):
            desc = "%s #%d" % (name, i)
            p = problem(op, d, case.get("stride", 1), case.get("padding", 0),
                        case.get("dilation", 1), 0, case.get("groups", 1))
            t.shape_check(desc, p, case["x_shape"], case["w_shape"], "channels_first",
                          case["out_shape"])
            if "data" in case:  # test-conv2d-dw.cpp: f32_range over the ggml memory order
                layouts = ["channels_last" if "CWHN" in case["memory_layout"]
                           else "channels_first"]
                x = f32_range(case["x_shape"], layouts[0])
                w = f32_range(case["w_shape"], "channels_first")
                kinds = ["f32"]
            else:
                layouts = ["channels_first", "channels_last"]
                kinds = case.get("kernel_types") or grid.get("kernel_types") or ["f32"]
                x = common.random_in_format(rng, case["x_shape"], "f32")
                w = common.random_in_format(rng, case["w_shape"], "f32",
                                            scale=1 / np.sqrt(np.prod(case["w_shape"][1:])))
            # Every layout x kernel type for small grids; alternating for the big ones.
            combos = [(lay, k) for lay in layouts for k in kinds]
            if len(grid["cases"]) > 20:
                combos = [combos[i % len(combos)]]
            for layout, kind in combos:
                wk = common.round_to(w, "f16") if kind == "f16" else w
                t.against_torch("%s %s w:%s" % (desc, layout, kind), p, x, wk, layout, "f32")


def f32_range(shape, layout):
    """ggml's f32_range(n, -1, 1) over the tensor's memory order: v[i] = -1 + i*(2/n)."""
    n = int(np.prod(shape))
    v = (-1 + np.arange(n) * (2.0 / n)).astype(np.float32).astype(np.float64)
    if layout == "channels_last":
        s = list(shape)
        return common.cl_to_cf(v.reshape([s[0]] + s[2:] + [s[1]]))
    return v.reshape(shape)


def main():
    xconv = common.setup(sys.argv)
    torch = common.import_torch()
    c = common.Counter("test_vectors")
    t = Tester(xconv, torch, c)
    root = vectors_dir()
    if not os.path.isdir(root):
        c.ok(False, "vectors", "no folder %s (set XCONV_VECTORS)" % root)
        return c.finish()

    def load(name):
        with open(os.path.join(root, name)) as f:
            return json.load(f)

    for name in ("mlx_fixed_cases.json", "ggml_cases.json"):
        for case in load(name)["cases"]:
            t.fixed(case)
    rng = np.random.default_rng(SEED)
    mlx_grids(t, load("mlx_grids.json"), rng)
    ggml_grids(t, load("ggml_grids.json"), rng)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""gpu_bench.py — times xconv's CUDA engines on the "gpu" list of a suite file and cuDNN
(through PyTorch) on the same problems in the same process.

    python3 scripts/gpu_bench.py [--suite shared/bench/suite.json] [--lib build-gpu/libxconv.so]
                                 [--dtypes bf16,f16] [--layouts cl] [--only NAME,...]
                                 [--engine NAME] [--json out.json] [--seconds S]

Per entry: xconv's chosen engine, its median time and TFLOP/s, cuDNN's, and the ratio
xconv/cuDNN (> 1: xconv faster). FLOPs as DESIGN.md §6. Before the table: the bf16 matrix
rate (torch.matmul 8192^3) and the device-to-device copy rate, the two ceilings. xconv's
result is checked against cuDNN's (relative L2 error) where cuDNN runs the dtype.

Both sides run on torch's current stream; times are CUDA-event medians of repeated runs
after warm-up, xconv and cuDNN interleaved per entry.
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
import xconv as X  # noqa: E402  (the ctypes structs of include/xconv.h)

TORCH_DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
            "f64": torch.float64, "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2,
            "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64,
            "i16": torch.int16, "c64": torch.complex64}
CUDNN_DTYPES = ("bf16", "f16", "f32", "f64")


def declare(lib):
    P = ctypes.POINTER
    lib.xconv_plan_create.restype = ctypes.c_int
    lib.xconv_plan_create.argtypes = [ctypes.c_void_p, P(X._Params), P(X._Tensor), P(X._Tensor),
                                      P(X._Tensor), P(X._Tensor), P(X._PlanOptions),
                                      P(ctypes.c_void_p), P(X._Error)]
    lib.xconv_plan_execute.restype = ctypes.c_int
    lib.xconv_plan_execute.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_void_p, ctypes.c_size_t,
                                                               P(X._Error)]
    lib.xconv_plan_workspace_size.restype = ctypes.c_size_t
    lib.xconv_plan_workspace_size.argtypes = [ctypes.c_void_p]
    lib.xconv_plan_engine.restype = ctypes.c_char_p
    lib.xconv_plan_engine.argtypes = [ctypes.c_void_p]
    lib.xconv_plan_destroy.argtypes = [ctypes.c_void_p]


def tensor_desc(t, dtype_name, shape):
    """A contiguous cuda descriptor of torch tensor t's memory with the given logical shape."""
    d = X._Tensor()
    d.dtype = X.DTYPES.index(dtype_name)
    d.rank = len(shape)
    for i, s in enumerate(shape):
        d.shape[i] = s
    d.strided = False
    d.data = t.data_ptr()
    d.buffer_bytes = t.numel() * t.element_size()
    d.device = 1
    d.device_index = t.device.index or 0
    return d


def flops(e):
    d = len(e["in"])
    k = math.prod(e["k"])
    cin_g = e["cin"] // e["groups"]
    cout_g = e["cout"] // e["groups"]
    if e["op"].startswith("conv_transpose"):
        return 2 * e["n"] * e["cin"] * cout_g * k * math.prod(e["in"])
    ys = out_sizes(e)
    return 2 * e["n"] * e["cout"] * cin_g * k * math.prod(ys)


def out_sizes(e):
    ys = []
    for i, x in enumerate(e["in"]):
        s, p, t, k = e["stride"][i], e["pad"][i], e["dil"][i], e["k"][i]
        if e["op"].startswith("conv_transpose"):
            ys.append((x - 1) * s - 2 * p + t * (k - 1) + 1)
        else:
            ys.append((x + 2 * p - t * (k - 1) - 1) // s + 1)
    return ys


def rand(shape, dt, device="cuda"):
    tdt = TORCH_DT[dt]
    if dt in ("i8", "u8", "i16", "i32", "i64"):
        return torch.randint(-8 if dt != "u8" else 0, 8, shape, device=device).to(tdt)
    if dt.startswith("f8"):
        return (torch.rand(shape, device=device) * 2 - 1).to(tdt)
    return (torch.rand(shape, device=device, dtype=torch.float32) * 2 - 1).to(tdt)


def time_fn(fn, min_reps=5, max_seconds=1.0):
    """Median milliseconds of fn() over repeated timed batches (after warm-up)."""
    fn()
    torch.cuda.synchronize()
    s, t = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    t.record()
    torch.cuda.synchronize()
    one = max(s.elapsed_time(t), 1e-3)
    per_batch = max(1, min(50, int(20.0 / one)))       # about 20 ms a batch
    batches = max(min_reps, min(15, int(max_seconds * 1000 / (one * per_batch))))
    times = []
    for _ in range(batches):
        s.record()
        for _ in range(per_batch):
            fn()
        t.record()
        t.synchronize()
        times.append(s.elapsed_time(t) / per_batch)
    return statistics.median(times)


def ceilings():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = time_fn(lambda: torch.matmul(a, b), max_seconds=0.5)
    mm = 2 * 8192 ** 3 / ms / 1e9
    src = torch.empty(2 * 1024 ** 3, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = time_fn(lambda: dst.copy_(src), max_seconds=0.5)
    bw = 2 * src.numel() / ms / 1e9   # bytes read + written per ms / 1e9 = TB/s
    del a, b, src, dst
    return mm, bw


SECONDS = 1.0  # timing budget per side and entry (--seconds)


def run_entry(lib, ctx, e, dt, layout, engine, check=True):
    d = len(e["in"])
    tr = e["op"].startswith("conv_transpose")
    g = e["groups"]
    n, cin, cout = e["n"], e["cin"], e["cout"]
    ys = out_sizes(e)
    cl = layout == "cl"
    mf = {1: None, 2: torch.channels_last, 3: torch.channels_last_3d}[d]
    # torch tensors, logical NC..., memory channels-last when cl
    x = rand([n, cin] + e["in"], dt)
    wt = rand(([cin, cout // g] if tr else [cout, cin // g]) + e["k"], dt)
    bias = None
    if cl and mf is not None:
        x = x.contiguous(memory_format=mf)
        wt = wt.contiguous(memory_format=mf)
    elif cl and d == 1:  # conv1d: channels-last memory is x.transpose(1, 2).contiguous()
        pass
    # xconv's view of the same data
    if cl:
        xm = x.movedim(1, -1).contiguous() if d == 1 else x  # memory is already [N, X.., C]
        x_shape = [n] + e["in"] + [cin]
        if tr:  # MLX weight [Cout, K.., Cin/g]: w_mlx[G*cout_g + b, k, a] = w_pt[G*cin_g + a, b, k]
            cin_g, cout_g = cin // g, cout // g
            wv = wt.reshape([g, cin_g, cout_g] + e["k"]).movedim(1, -1)  # [g, cout_g, K.., cin_g]
            wm = wv.reshape([cout] + e["k"] + [cin_g]).contiguous()
        else:
            wm = wt.movedim(1, -1).contiguous() if d == 1 else wt
        w_shape = [cout] + e["k"] + [(cin if not tr else cin) // g]
        y_shape = [n] + ys + [cout]
        ym = torch.empty(y_shape, dtype=TORCH_DT[dt] if dt in CUDNN_DTYPES else x.dtype,
                         device="cuda")
    else:
        xm, wm = x, wt
        x_shape = [n, cin] + e["in"]
        w_shape = list(wt.shape)
        y_shape = [n, cout] + ys
        ym = torch.empty(y_shape, dtype=x.dtype, device="cuda")
    ydt = dt if dt not in ("i8", "u8") else "i32"
    if ydt != dt:
        ym = torch.empty(y_shape, dtype=TORCH_DT[ydt], device="cuda")
    params = X._Params()
    params.op = 1 if tr else 0
    params.spatial_rank = d
    params.layout = 1 if cl else 0
    for i in range(d):
        params.stride[i] = e["stride"][i]
        params.dilation[i] = e["dil"][i]
        params.pad_lo[i] = params.pad_hi[i] = e["pad"][i]
    params.groups = g
    xd = tensor_desc(xm, dt, x_shape)
    wd = tensor_desc(wm, dt, w_shape)
    yd = tensor_desc(ym, ydt, y_shape)
    opts = X._PlanOptions(engine=engine.encode() if engine else None, allow_tf32=False)
    plan = ctypes.c_void_p()
    err = X._Error()
    st = lib.xconv_plan_create(ctx, ctypes.byref(params), ctypes.byref(xd), ctypes.byref(wd), None,
                               ctypes.byref(yd), ctypes.byref(opts), ctypes.byref(plan),
                               ctypes.byref(err))
    if st != 0:
        return {"error": err.description.decode()}
    name = lib.xconv_plan_engine(plan).decode()
    wsb = lib.xconv_plan_workspace_size(plan)
    ws = torch.empty(max(wsb, 1), dtype=torch.uint8, device="cuda")

    def xrun():
        s = lib.xconv_plan_execute(plan, xm.data_ptr(), wm.data_ptr(), None, ym.data_ptr(),
                                   ws.data_ptr() if wsb else None, wsb, ctypes.byref(err))
        if s != 0:
            raise RuntimeError(err.description.decode())

    fl = flops(e)
    # the fewest bytes a run must move: x, w and y once each (bandwidth-bound entries)
    nbytes = (xm.numel() * xm.element_size() + wm.numel() * wm.element_size() +
              ym.numel() * ym.element_size())
    res = {"engine": name, "gflop": fl / 1e9, "min_bytes": nbytes}
    slow = name == "cuda.generic"
    res["xconv_ms"] = time_fn(xrun, min_reps=1 if slow else 5,
                              max_seconds=0.3 * SECONDS if slow else SECONDS)
    res["xconv_tflops"] = fl / res["xconv_ms"] / 1e9
    res["xconv_tbs"] = nbytes / res["xconv_ms"] / 1e9
    if dt in CUDNN_DTYPES:
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[d]
        convt = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[d]
        xt = x if (not cl or d > 1) else x  # conv1d has no channels-last memory format
        if tr:
            def trun():
                return convt(xt, wt, None, stride=e["stride"], padding=e["pad"], groups=g,
                             dilation=e["dil"])
        else:
            def trun():
                return conv(xt, wt, None, stride=e["stride"], padding=e["pad"], groups=g,
                            dilation=e["dil"])
        try:
            ref = trun()
            res["cudnn_ms"] = time_fn(trun, max_seconds=SECONDS)
            res["cudnn_tflops"] = fl / res["cudnn_ms"] / 1e9
            res["cudnn_tbs"] = nbytes / res["cudnn_ms"] / 1e9
            res["ratio"] = res["cudnn_ms"] / res["xconv_ms"]
            if check:
                xrun()
                torch.cuda.synchronize()
                got = ym.float()
                if cl:
                    got = got.movedim(-1, 1)
                r = ref.float()
                res["rel_err"] = float((got - r).norm() / max(r.norm(), 1e-30))
        except Exception as ex:  # cuDNN refuses some dtypes
            res["cudnn_error"] = str(ex).splitlines()[0][:80]
    lib.xconv_plan_destroy(plan)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default=None)
    ap.add_argument("--lib", default=None)
    ap.add_argument("--dtypes", default="bf16,f16")
    ap.add_argument("--layouts", default="cl")
    ap.add_argument("--only", default=None)
    ap.add_argument("--engine", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-ceilings", action="store_true")
    ap.add_argument("--seconds", type=float, default=1.0, help="timing budget per side and entry")
    a = ap.parse_args()
    global SECONDS
    SECONDS = a.seconds
    suite_path = a.suite
    for cand in ([suite_path] if suite_path else
                 [os.path.join(REPO, "shared", "bench", "suite.json"),
                  os.path.join(REPO, "..", "shared", "bench", "suite.json"),
                  os.path.join(REPO, "tests", "gpu", "suite_gpu.json")]):
        if cand and os.path.exists(cand):
            suite_path = cand
            break
    suite = json.load(open(suite_path))["gpu"]
    if a.only:
        keep = set(a.only.split(","))
        suite = [e for e in suite if e["name"] in keep]
    lib = X.load_library(a.lib)
    declare(lib)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    stream = torch.cuda.current_stream().cuda_stream
    copts = X._ContextOptions(threads=1, cuda_device=0, cuda_stream=stream)
    ctx = ctypes.c_void_p()
    err = X._Error()
    if lib.xconv_context_create(ctypes.byref(copts), ctypes.byref(ctx), ctypes.byref(err)) != 0:
        sys.exit("context: " + err.description.decode())
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "rows": []}
    if not a.no_ceilings:
        mm, bw = ceilings()
        out["bf16_matmul_tflops"], out["copy_tbs"] = mm, bw
        print("ceilings: bf16 matmul %.0f TFLOP/s, device copy %.2f TB/s (read+write)" % (mm, bw))
    print("%-14s %-6s %-3s %-14s %9s %9s %9s %7s %9s %7s %7s" % (
        "name", "dtype", "lay", "engine", "GFLOP", "xconv TF", "cudnn TF", "ratio", "rel_err",
        "x TB/s", "c TB/s"))
    for dt in a.dtypes.split(","):
        for lay in a.layouts.split(","):
            for e in suite:
                try:
                    r = run_entry(lib, ctx, e, dt, lay, a.engine)
                except Exception as ex:
                    r = {"error": str(ex).splitlines()[0][:100]}
                r.update({"name": e["name"], "dtype": dt, "layout": lay})
                out["rows"].append(r)
                if "error" in r:
                    print("%-14s %-6s %-3s error: %s" % (e["name"], dt, lay, r["error"]))
                    continue
                print("%-14s %-6s %-3s %-14s %9.1f %9.1f %9s %7s %9s %7.2f %7s" % (
                    e["name"], dt, lay, r["engine"], r["gflop"], r["xconv_tflops"],
                    "%.1f" % r["cudnn_tflops"] if "cudnn_tflops" in r else "-",
                    "%.2f" % r["ratio"] if "ratio" in r else "-",
                    "%.1e" % r["rel_err"] if "rel_err" in r else r.get("cudnn_error", "-")[:20],
                    r["xconv_tbs"], "%.2f" % r["cudnn_tbs"] if "cudnn_tbs" in r else "-"),
                    flush=True)
                torch.cuda.empty_cache()
    ratios = [r["ratio"] for r in out["rows"] if "ratio" in r]
    if ratios:
        gm = math.exp(sum(math.log(v) for v in ratios) / len(ratios))
        print("geometric mean xconv/cudnn over %d rows: %.3f (min %.3f)" % (len(ratios), gm, min(ratios)))
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1)
    lib.xconv_context_destroy(ctx)


if __name__ == "__main__":
    main()

"""xconv — a small ctypes binding over the xconv shared library, numpy in and out.

    import numpy as np, xconv
    y = xconv.conv(x, w, bias, stride=2, padding=[(0, 1), (1, 1)], groups=4)
    y = xconv.conv_transpose(x, w, stride=2, output_padding=1)

The library is found through the environment variable XCONV_LIB (the .so itself or the
folder holding it), else in the repository's build folders (build/, then build-*/, newest
first), else by ctypes.util.find_library("xconv").

Semantics are those of DESIGN.md: `layout="channels_first"` is PyTorch's (conv weight
[Cout, Cin/g, K..], conv_transpose weight [Cin, Cout/g, K..]); `layout="channels_last"` is
MLX's (x [N, X.., Cin], weight [Cout, K.., Cin/g] for both ops).

Dtypes: every numpy numeric dtype maps onto the library's (uint8..int64, float16/32/64,
complex64/128). bf16 and the two f8 formats come as ml_dtypes arrays (bfloat16,
float8_e4m3fn, float8_e5m2) when that package is installed. Either way `dtype="bf16"`
(or "f8e4m3", "f8e5m2") converts x and w through float32 with the library's own scalar
converters (round to nearest even, e4m3 saturating: ml_dtypes would give NaN there), and
results in those formats come back as ml_dtypes arrays, or widened to float32 when
ml_dtypes is absent. Other conversions (dtype="f16", "i32", ...) are numpy's astype.

Non-contiguous arrays (slices, negative strides, broadcasts) are passed as strided views
of their base allocation, never copied, so the library's strided path and extent checks
see them as they are; only strides that are not a multiple of the item size are copied.
"""

import atexit
import ctypes
import ctypes.util
import glob
import os

import numpy as np

try:  # optional: numpy dtypes for bf16 and f8
    import ml_dtypes as _ml_dtypes_module
except ImportError:  # pragma: no cover - depends on the machine
    _ml_dtypes_module = None

# Tests set this to None to exercise the path for machines without ml_dtypes.
ml_dtypes = _ml_dtypes_module

__all__ = ["conv", "conv_transpose", "im2col", "col2im", "output_shape", "engines",
           "version", "XconvError", "DTYPES", "load_library"]

MAX_RANK = 5
MAX_SPATIAL = 3

STATUS_NAMES = ["OK", "INVALID_ARGUMENT", "UNSUPPORTED", "OUT_OF_MEMORY",
                "WORKSPACE_TOO_SMALL", "DEVICE_ERROR", "INTERNAL"]

# The library's dtype enum, in xconv.h's (stable) order.
DTYPES = ["invalid", "u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64",
          "f8e4m3", "f8e5m2", "f16", "bf16", "f32", "f64", "c64", "c128"]
_DTYPE_CODE = {name: code for code, name in enumerate(DTYPES)}

# Storage of each dtype as a plain numpy dtype (the reduced floats as their raw bits).
_STORAGE = {"u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16,
            "u32": np.uint32, "i32": np.int32, "u64": np.uint64, "i64": np.int64,
            "f8e4m3": np.uint8, "f8e5m2": np.uint8, "f16": np.float16, "bf16": np.uint16,
            "f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128}
# The formats numpy lacks; these go through the library's converters.
_REDUCED = ("bf16", "f8e4m3", "f8e5m2")
_ML_NAMES = {"bf16": "bfloat16", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}

_ALIASES = {"uint8": "u8", "int8": "i8", "uint16": "u16", "int16": "i16", "uint32": "u32",
            "int32": "i32", "uint64": "u64", "int64": "i64", "float16": "f16", "half": "f16",
            "float32": "f32", "float": "f32", "float64": "f64", "double": "f64",
            "complex64": "c64", "complex128": "c128", "bfloat16": "bf16",
            "float8_e4m3fn": "f8e4m3", "float8_e4m3": "f8e4m3", "e4m3": "f8e4m3",
            "float8_e5m2": "f8e5m2", "e5m2": "f8e5m2"}

_LAYOUTS = {"channels_first": 0, "ncx": 0, "nchw": 0, "channels_last": 1, "nxc": 1, "nhwc": 1}


# ---------------------------------------------------------------------------------------
# The C structs, field for field as in include/xconv.h
# ---------------------------------------------------------------------------------------

class _Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int),
                ("operation", ctypes.c_char * 64),
                ("parameter", ctypes.c_char * 32),
                ("description", ctypes.c_char * 256)]


class _Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int),
                ("rank", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_RANK),
                ("strides", ctypes.c_int64 * MAX_RANK),
                ("offset", ctypes.c_int64),
                ("strided", ctypes.c_bool),
                ("data", ctypes.c_void_p),
                ("buffer_bytes", ctypes.c_size_t),
                ("device", ctypes.c_int),
                ("device_index", ctypes.c_int)]


class _Params(ctypes.Structure):
    _fields_ = [("op", ctypes.c_int),
                ("spatial_rank", ctypes.c_int),
                ("layout", ctypes.c_int),
                ("stride", ctypes.c_int64 * MAX_SPATIAL),
                ("dilation", ctypes.c_int64 * MAX_SPATIAL),
                ("pad_lo", ctypes.c_int64 * MAX_SPATIAL),
                ("pad_hi", ctypes.c_int64 * MAX_SPATIAL),
                ("output_padding", ctypes.c_int64 * MAX_SPATIAL),
                ("groups", ctypes.c_int64)]


class _PlanOptions(ctypes.Structure):
    _fields_ = [("engine", ctypes.c_char_p),
                ("allow_tf32", ctypes.c_bool),
                ("constant_weights", ctypes.c_bool),
                ("allow_fp8_fast_accum", ctypes.c_bool)]


class _ContextOptions(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_int),
                ("cuda_device", ctypes.c_int),
                ("cuda_stream", ctypes.c_void_p)]


class XconvError(Exception):
    """A non-OK status from the library, with its error record."""

    def __init__(self, status, operation="", parameter="", description=""):
        self.status = status
        self.status_name = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else str(status)
        self.operation = operation
        self.parameter = parameter
        self.description = description
        where = " (%s)" % parameter if parameter else ""
        super().__init__("%s in %s%s: %s" % (self.status_name, operation, where, description))


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------

_lib = None
_contexts = {}
_tables = {}


def _candidates():
    env = os.environ.get("XCONV_LIB")
    if env:
        if os.path.isdir(env):
            yield from sorted(glob.glob(os.path.join(env, "libxconv.so*")))
            yield from sorted(glob.glob(os.path.join(env, "libxconv*.dylib")))
        else:
            yield env
        return
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    yield os.path.join(repo, "build", "libxconv.so")
    others = glob.glob(os.path.join(repo, "build*", "libxconv.so"))
    for path in sorted(others, key=os.path.getmtime, reverse=True):
        yield path
    found = ctypes.util.find_library("xconv")
    if found:
        yield found


def load_library(path=None):
    """Loads (once) and returns the ctypes handle of the library."""
    global _lib
    if _lib is not None and path is None:
        return _lib
    tried = []
    for cand in ([path] if path else _candidates()):
        if not cand or (os.path.sep in cand and not os.path.exists(cand)):
            tried.append(cand)
            continue
        try:
            lib = ctypes.CDLL(cand)
        except OSError as e:
            tried.append("%s (%s)" % (cand, e))
            continue
        _declare(lib)
        _lib = lib
        return lib
    raise OSError("libxconv not found; set XCONV_LIB. Tried: %s" % ", ".join(map(str, tried)))


def _declare(lib):
    P = ctypes.POINTER
    i64p = P(ctypes.c_int64)
    sigs = {
        "xconv_status_name": (ctypes.c_char_p, [ctypes.c_int]),
        "xconv_version": (ctypes.c_char_p, []),
        "xconv_dtype_name": (ctypes.c_char_p, [ctypes.c_int]),
        "xconv_dtype_size": (ctypes.c_size_t, [ctypes.c_int]),
        "xconv_dtype_can_widen": (ctypes.c_bool, [ctypes.c_int, ctypes.c_int]),
        "xconv_f16_to_f32": (ctypes.c_float, [ctypes.c_uint16]),
        "xconv_f32_to_f16": (ctypes.c_uint16, [ctypes.c_float]),
        "xconv_bf16_to_f32": (ctypes.c_float, [ctypes.c_uint16]),
        "xconv_f32_to_bf16": (ctypes.c_uint16, [ctypes.c_float]),
        "xconv_f8e4m3_to_f32": (ctypes.c_float, [ctypes.c_uint8]),
        "xconv_f32_to_f8e4m3": (ctypes.c_uint8, [ctypes.c_float]),
        "xconv_f8e5m2_to_f32": (ctypes.c_float, [ctypes.c_uint8]),
        "xconv_f32_to_f8e5m2": (ctypes.c_uint8, [ctypes.c_float]),
        "xconv_output_shape": (ctypes.c_int, [P(_Params), i64p, i64p, i64p, P(_Error)]),
        "xconv_context_create": (ctypes.c_int, [P(_ContextOptions), P(ctypes.c_void_p),
                                                P(_Error)]),
        "xconv_context_destroy": (None, [ctypes.c_void_p]),
        "xconv_context_threads": (ctypes.c_int, [ctypes.c_void_p]),
        "xconv_conv": (ctypes.c_int, [ctypes.c_void_p, P(_Params), P(_Tensor), P(_Tensor),
                                      P(_Tensor), P(_Tensor), P(_PlanOptions),
                                      P(ctypes.c_char_p), P(_Error)]),
        "xconv_engine_count": (ctypes.c_int, []),
        "xconv_engine_name": (ctypes.c_char_p, [ctypes.c_int]),
        "xconv_engine_supports": (ctypes.c_int, [ctypes.c_char_p, P(_Params), P(_Tensor),
                                                 P(_Tensor), P(_Tensor), P(_Tensor),
                                                 P(_Error)]),
        "xconv_im2col": (ctypes.c_int, [ctypes.c_void_p, P(_Params), i64p, P(_Tensor),
                                        P(_Tensor), P(_Error)]),
        "xconv_col2im": (ctypes.c_int, [ctypes.c_void_p, P(_Params), i64p, P(_Tensor),
                                        P(_Tensor), P(_Error)]),
    }
    for name, (restype, argtypes) in sigs.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:  # an older library: fail when the call is made instead
            continue
        fn.restype = restype
        fn.argtypes = argtypes


def _check(status, err):
    if status != 0:
        raise XconvError(status, err.operation.decode(errors="replace"),
                         err.parameter.decode(errors="replace"),
                         err.description.decode(errors="replace"))


@atexit.register
def _destroy_contexts():
    if _lib is not None:
        for ctx in _contexts.values():
            _lib.xconv_context_destroy(ctx)
    _contexts.clear()


def _context(threads, device_index=0):
    """NULL (the library's default) or a cached context with `threads` threads on CUDA
    device `device_index`."""
    if threads is None and device_index == 0:
        return None
    lib = load_library()
    key = (int(threads or 0), int(device_index))
    if key not in _contexts:
        opts = _ContextOptions(threads=key[0], cuda_device=key[1])
        ctx = ctypes.c_void_p()
        err = _Error()
        _check(lib.xconv_context_create(ctypes.byref(opts), ctypes.byref(ctx),
                                        ctypes.byref(err)), err)
        _contexts[key] = ctx
    return _contexts[key]


# ---------------------------------------------------------------------------------------
# CUDA: device copies of host views (device="cuda")
# ---------------------------------------------------------------------------------------

_cudart = None


def _cuda():
    """The CUDA runtime the library was linked with (loaded with it), via ctypes."""
    global _cudart
    if _cudart is None:
        load_library()
        names = ["libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"]
        found = ctypes.util.find_library("cudart")
        rt = None
        for name in names + ([found] if found else []):
            try:
                rt = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if rt is None:
            raise OSError("device='cuda' needs the CUDA runtime (libcudart), not found")
        rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        rt.cudaFree.argtypes = [ctypes.c_void_p]
        rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_int]
        rt.cudaSetDevice.argtypes = [ctypes.c_int]
        rt.cudaGetErrorString.restype = ctypes.c_char_p
        rt.cudaGetErrorString.argtypes = [ctypes.c_int]
        _cudart = rt
    return _cudart


def _cuda_check(code, what):
    if code != 0:
        msg = _cuda().cudaGetErrorString(code).decode(errors="replace")
        raise OSError("%s failed: %s (%d)" % (what, msg, code))


def _on_device(device, device_index, inputs, output, call):
    """Runs call() with the descriptors moved to `device`: on CUDA every tensor's whole
    buffer span (as the descriptor states it: strides, offset and canaries kept) is copied
    to the device, and y's span is copied back afterwards. Returns call()'s status."""
    if device == "cpu":
        return call()
    if device != "cuda":
        raise ValueError("unknown device %r" % (device,))
    rt = _cuda()
    _cuda_check(rt.cudaSetDevice(int(device_index)), "cudaSetDevice")
    moved = []  # (descriptor, host pointer, device pointer, bytes)
    try:
        for t in [u for u in inputs if u is not None] + [output]:
            host, size = t.data, t.buffer_bytes
            dev = ctypes.c_void_p()
            if host and size:
                _cuda_check(rt.cudaMalloc(ctypes.byref(dev), size), "cudaMalloc")
                moved.append((t, host, dev.value, size))
                _cuda_check(rt.cudaMemcpy(dev, host, size, 1), "cudaMemcpy to device")
                t.data = dev.value
            t.device = 1
            t.device_index = int(device_index)
        status = call()
        _cuda_check(rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
        if status == 0:
            for t, host, dev, size in moved:
                if t is output:
                    _cuda_check(rt.cudaMemcpy(host, dev, size, 2), "cudaMemcpy to host")
        return status
    finally:
        for t, host, dev, size in moved:
            rt.cudaFree(dev)
            t.data = host


def version():
    return load_library().xconv_version().decode()


def engines():
    """The names of the engines built into the library, in table order."""
    lib = load_library()
    return [lib.xconv_engine_name(i).decode() for i in range(lib.xconv_engine_count())]


# ---------------------------------------------------------------------------------------
# Dtypes
# ---------------------------------------------------------------------------------------

def dtype_name(dt):
    """The library's short name for a dtype given as name, numpy dtype or ml_dtypes dtype."""
    if isinstance(dt, str):
        key = dt.lower()
        key = _ALIASES.get(key, key)
        if key in _DTYPE_CODE and key != "invalid":
            return key
        raise ValueError("unknown dtype %r" % dt)
    ndt = np.dtype(dt)
    if ml_dtypes is not None:
        for name, mlname in _ML_NAMES.items():
            if ndt == np.dtype(getattr(ml_dtypes, mlname)):
                return name
    if ndt.kind in "uifc" and ndt.name in _ALIASES:
        return _ALIASES[ndt.name]
    raise ValueError("dtype %s has no xconv counterpart" % ndt)


def _table(name):
    """Decode table of a reduced format: every code -> float32, by the library."""
    if name not in _tables:
        lib = load_library()
        fn = {"bf16": lib.xconv_bf16_to_f32, "f16": lib.xconv_f16_to_f32,
              "f8e4m3": lib.xconv_f8e4m3_to_f32, "f8e5m2": lib.xconv_f8e5m2_to_f32}[name]
        count = 1 << (8 * np.dtype(_STORAGE[name]).itemsize)
        _tables[name] = np.array([fn(c) for c in range(count)], dtype=np.float32)
    return _tables[name]


def to_bits(values, name):
    """float values -> raw bits of `name` (bf16, f16, f8e4m3, f8e5m2) via the library's
    f32 converters; the values pass through float32 first."""
    lib = load_library()
    fn = {"bf16": lib.xconv_f32_to_bf16, "f16": lib.xconv_f32_to_f16,
          "f8e4m3": lib.xconv_f32_to_f8e4m3, "f8e5m2": lib.xconv_f32_to_f8e5m2}[name]
    f = np.ascontiguousarray(values, dtype=np.float32)
    # One call per distinct value keeps big arrays cheap (a ctypes call costs ~1 us).
    uniq, inverse = np.unique(f.view(np.uint32).ravel(), return_inverse=True)
    codes = np.array([fn(float(u)) for u in uniq.view(np.float32)], dtype=_STORAGE[name])
    return codes[inverse].reshape(f.shape)


def from_bits(bits, name):
    """Raw bits of `name` -> float32 values, decoded by the library."""
    return _table(name)[np.asarray(bits).astype(np.int64)]


def _as_dtype(a, name):
    """`a` as an array whose memory holds `name`'s storage. Arrays already of that dtype
    are returned as they are (views kept), everything else is converted."""
    a = np.asarray(a)
    try:
        have = dtype_name(a.dtype)
    except ValueError:
        have = None
    if have == name:
        if name in _REDUCED:  # an ml_dtypes array: hand over its bits
            return a.view(_STORAGE[name])
        return a
    if name in _REDUCED:
        return to_bits(a.astype(np.float32), name)
    return a.astype(_STORAGE[name])


def _result(y_storage, name):
    """The library's output storage as the array handed back to the caller."""
    if name not in _REDUCED:
        return y_storage
    if ml_dtypes is not None:
        return y_storage.view(getattr(ml_dtypes, _ML_NAMES[name]))
    return from_bits(y_storage, name)


# ---------------------------------------------------------------------------------------
# Tensors
# ---------------------------------------------------------------------------------------

def _byte_bounds(a):
    """[low, high) addresses of the bytes a's elements occupy (np.byte_bounds, which
    numpy 2 moved)."""
    lo = hi = a.ctypes.data
    for n, s in zip(a.shape, a.strides):
        if n == 0:
            return lo, lo
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + a.dtype.itemsize


def _root(a):
    """The array that owns a's memory (following numpy's chain of bases)."""
    base = a
    while isinstance(base.base, np.ndarray):
        base = base.base
    return base


def _tensor(a, name, keep):
    """A descriptor for array `a` (storage of dtype `name`). Contiguous arrays go as such;
    others as strided views into the span of their base allocation. `keep` collects the
    arrays that must outlive the call."""
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    item = a.dtype.itemsize
    if a.ndim < 1 or a.ndim > MAX_RANK:
        raise ValueError("tensor rank %d outside 1..%d" % (a.ndim, MAX_RANK))
    if any(s % item for s in a.strides):
        a = np.ascontiguousarray(a)  # byte strides the library cannot express
    keep.append(a)
    t = _Tensor()
    t.dtype = _DTYPE_CODE[name]
    t.rank = a.ndim
    for i, n in enumerate(a.shape):
        t.shape[i] = n
    t.device = 0
    t.device_index = 0
    if a.flags.c_contiguous:
        t.strided = False
        t.data = a.ctypes.data if a.size else None
        t.buffer_bytes = a.nbytes
        return t
    # A strided view: the buffer is the base allocation's span when the view lies in it on
    # the element grid, else the view's own span.
    lo, hi = _byte_bounds(a)
    root = _root(a)
    if root is not a and isinstance(root, np.ndarray) and root.size:
        rlo, rhi = _byte_bounds(root)
        if rlo <= lo and hi <= rhi and (a.ctypes.data - rlo) % item == 0:
            lo, hi = rlo, rhi
            keep.append(root)
    t.strided = True
    for i, s in enumerate(a.strides):
        t.strides[i] = s // item
    t.data = lo
    t.buffer_bytes = hi - lo
    t.offset = (a.ctypes.data - lo) // item
    return t


# ---------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------

def _per_dim(value, d, what):
    if np.isscalar(value):
        return [int(value)] * d
    value = [int(v) for v in value]
    if len(value) != d:
        raise ValueError("%s has %d entries for %d spatial dims" % (what, len(value), d))
    return value


def _padding(value, d):
    """int, per-dim ints, or per-dim (lo, hi) pairs -> (lo list, hi list)."""
    if np.isscalar(value):
        return [int(value)] * d, [int(value)] * d
    value = list(value)
    if len(value) != d:
        raise ValueError("padding has %d entries for %d spatial dims" % (len(value), d))
    lo, hi = [], []
    for v in value:
        if np.isscalar(v):
            lo.append(int(v))
            hi.append(int(v))
        else:
            a, b = v
            lo.append(int(a))
            hi.append(int(b))
    return lo, hi


def _params(d, transpose, layout, stride, padding, dilation, output_padding, groups):
    if not 1 <= d <= MAX_SPATIAL:
        raise ValueError("spatial rank %d outside 1..%d" % (d, MAX_SPATIAL))
    if layout not in _LAYOUTS:
        raise ValueError("unknown layout %r" % (layout,))
    p = _Params()
    p.op = 1 if transpose else 0
    p.spatial_rank = d
    p.layout = _LAYOUTS[layout]
    lo, hi = _padding(padding, d)
    for i, (s, t, a, b, o) in enumerate(zip(_per_dim(stride, d, "stride"),
                                            _per_dim(dilation, d, "dilation"), lo, hi,
                                            _per_dim(output_padding, d, "output_padding"))):
        p.stride[i], p.dilation[i], p.pad_lo[i], p.pad_hi[i], p.output_padding[i] = s, t, a, b, o
    for i in range(d, MAX_SPATIAL):
        p.stride[i] = p.dilation[i] = 1
    p.groups = int(groups)
    return p


def _shape_arr(shape):
    arr = (ctypes.c_int64 * MAX_RANK)()
    for i, n in enumerate(shape):
        arr[i] = int(n)
    return arr


def _output_shape(p, x_shape, w_shape):
    lib = load_library()
    y = (ctypes.c_int64 * MAX_RANK)()
    err = _Error()
    _check(lib.xconv_output_shape(ctypes.byref(p), _shape_arr(x_shape), _shape_arr(w_shape),
                                  y, ctypes.byref(err)), err)
    return tuple(y[i] for i in range(p.spatial_rank + 2))


def output_shape(x_shape, w_shape, *, stride=1, padding=0, dilation=1, output_padding=0,
                 groups=1, layout="channels_first", transpose=False):
    """The shape of y for these shapes and parameters, validated as the library does."""
    d = len(x_shape) - 2
    p = _params(d, transpose, layout, stride, padding, dilation, output_padding, groups)
    return _output_shape(p, x_shape, w_shape)


# ---------------------------------------------------------------------------------------
# Operations
# ---------------------------------------------------------------------------------------

def _prepare(arrays, dtype):
    """Storage arrays and the dtype name for x and w (and im2col's x)."""
    arrays = [np.asarray(a) for a in arrays]
    if dtype is not None:
        name = dtype_name(dtype)
        return [_as_dtype(a, name) for a in arrays], [name] * len(arrays)
    names = [dtype_name(a.dtype) for a in arrays]
    return [_as_dtype(a, n) for a, n in zip(arrays, names)], names


def _output(shape, name, out, keep):
    if out is None:
        y = np.zeros(shape, dtype=_STORAGE[name])
        return y, _tensor(y, name, keep)
    if tuple(out.shape) != tuple(shape) or dtype_name(out.dtype) != name:
        raise ValueError("out has shape %s dtype %s, expected %s %s"
                         % (out.shape, out.dtype, shape, name))
    y = out.view(_STORAGE[name]) if name in _REDUCED else out
    return y, _tensor(y, name, keep)


def conv(x, w, bias=None, *, stride=1, padding=0, dilation=1, output_padding=0, groups=1,
         layout="channels_first", transpose=False, dtype=None, out_dtype=None, engine=None,
         threads=None, out=None, return_engine=False, device="cpu", device_index=0,
         allow_tf32=False, allow_fp8_fast_accum=False):
    """Convolution (or, with transpose=True, its adjoint) of numpy arrays.

    padding: an int, one int per spatial dim, or one (lo, hi) pair per spatial dim.
    dtype: converts x and w to this dtype first (None: use x's and w's own dtypes).
    out_dtype: y's (and bias's) dtype, the same as x's or a wider one; None = x's.
    engine: force an engine by name (see engines()); threads: CPU threads (None: default).
    out: an optional array (any strides) to write y into; it is also returned.
    device: "cpu", or "cuda" to run on CUDA device `device_index` (inputs are copied there
    and y back, each as its whole buffer span so that strides are kept).
    allow_tf32: the plan option: reduced-precision f32 engines may run (cpu.winograd,
    cuda.f32_bf16x3).
    allow_fp8_fast_accum: the plan option: fp8 convs may sum in the tensor cores' fp8
    accumulation (cuda.igemm_wgmma's native fp8 wgmma; fewer bits than f32).
    Returns y, or (y, engine name) with return_engine=True.
    """
    lib = load_library()
    (xs, ws), (xname, wname) = _prepare([x, w], dtype)
    yname = dtype_name(out_dtype) if out_dtype is not None else xname
    d = xs.ndim - 2
    p = _params(d, transpose, layout, stride, padding, dilation, output_padding, groups)
    yshape = _output_shape(p, xs.shape, ws.shape)
    keep = []
    tx = _tensor(xs, xname, keep)
    tw = _tensor(ws, wname, keep)
    tb = None
    if bias is not None:
        bs = _as_dtype(bias, yname)
        tb = _tensor(bs, yname, keep)
    y, ty = _output(yshape, yname, out, keep)
    opts = _PlanOptions(engine=engine.encode() if engine else None, allow_tf32=bool(allow_tf32),
                        allow_fp8_fast_accum=bool(allow_fp8_fast_accum))
    chosen = ctypes.c_char_p()
    err = _Error()
    status = _on_device(device, device_index, [tx, tw, tb], ty, lambda: lib.xconv_conv(
        _context(threads, device_index), ctypes.byref(p), ctypes.byref(tx), ctypes.byref(tw),
        ctypes.byref(tb) if tb is not None else None, ctypes.byref(ty), ctypes.byref(opts),
        ctypes.byref(chosen), ctypes.byref(err)))
    _check(status, err)
    result = out if out is not None else _result(y, yname)
    if return_engine:
        return result, (chosen.value or b"").decode()
    return result


def conv_transpose(x, w, bias=None, **kwargs):
    """conv(..., transpose=True): PyTorch's conv_transposeNd (channels_first) or MLX's
    (channels_last, weight [Cout, K.., Cin/g])."""
    kwargs["transpose"] = True
    return conv(x, w, bias, **kwargs)


def _im2col_params(d, layout, stride, padding, dilation):
    return _params(d, False, layout, stride, padding, dilation, 0, 1)


def _cols_shape(p, image_shape, kernel):
    """cols' shape for an image of image_shape (full, in the layout), via the conv shape."""
    d = p.spatial_rank
    n = image_shape[0]
    if p.layout == 0:
        c = image_shape[1]
        yshape = _output_shape(p, image_shape, [1, c] + list(kernel))
        return (n, c * int(np.prod(kernel)), int(np.prod(yshape[2:2 + d])))
    c = image_shape[-1]
    yshape = _output_shape(p, image_shape, [1] + list(kernel) + [c])
    return (n, int(np.prod(yshape[1:1 + d])), int(np.prod(kernel)) * c)


def im2col(x, kernel, *, stride=1, padding=0, dilation=1, layout="channels_first",
           dtype=None, threads=None, device="cpu", device_index=0):
    """Unfolds x's patches: channels_first x [N, C, X..] -> [N, C*prod(K), prod(Y)];
    channels_last x [N, X.., C] -> [N, prod(Y), prod(K)*C]."""
    lib = load_library()
    (xs,), (name,) = _prepare([x], dtype)
    kernel = [int(k) for k in kernel]
    p = _im2col_params(len(kernel), layout, stride, padding, dilation)
    shape = _cols_shape(p, xs.shape, kernel)
    keep = []
    tx = _tensor(xs, name, keep)
    cols, tc = _output(shape, name, None, keep)
    err = _Error()
    karr = (ctypes.c_int64 * MAX_SPATIAL)(*kernel)
    _check(_on_device(device, device_index, [tx], tc, lambda: lib.xconv_im2col(
        _context(threads, device_index), ctypes.byref(p), karr, ctypes.byref(tx),
        ctypes.byref(tc), ctypes.byref(err))), err)
    return _result(cols, name)


def col2im(cols, image_shape, kernel, *, stride=1, padding=0, dilation=1,
           layout="channels_first", dtype=None, out_dtype=None, threads=None, device="cpu",
           device_index=0):
    """Folds columns back into an image (the adjoint of im2col), summing overlaps.
    image_shape: the full image shape in the layout, or only its spatial sizes."""
    lib = load_library()
    (cs,), (name,) = _prepare([cols], dtype)
    kernel = [int(k) for k in kernel]
    d = len(kernel)
    image_shape = [int(n) for n in image_shape]
    if len(image_shape) == d:  # spatial sizes only: N and C from cols
        kk = int(np.prod(kernel))
        if _LAYOUTS.get(layout) == 0:
            image_shape = [cs.shape[0], cs.shape[1] // kk] + image_shape
        else:
            image_shape = [cs.shape[0]] + image_shape + [cs.shape[2] // kk]
    yname = dtype_name(out_dtype) if out_dtype is not None else name
    p = _im2col_params(d, layout, stride, padding, dilation)
    keep = []
    tc = _tensor(cs, name, keep)
    y, ty = _output(tuple(image_shape), yname, None, keep)
    err = _Error()
    karr = (ctypes.c_int64 * MAX_SPATIAL)(*kernel)
    _check(_on_device(device, device_index, [tc], ty, lambda: lib.xconv_col2im(
        _context(threads, device_index), ctypes.byref(p), karr, ctypes.byref(tc),
        ctypes.byref(ty), ctypes.byref(err))), err)
    return _result(y, yname)

"""KIR's element semantics as C++ expressions, and the device helpers they call (written at
the top of every C++ kernel)."""

from __future__ import annotations

import math

import numpy as np

from kir.dialect import tile as tl
from kir.dtypes import DTYPES
from kir.interp import values as V
from lowering.emit.cbase.dialect import NARROW_FLOATS, CDialect

# ---- element semantics as C++ expressions ------------------------------------------------------


class CExprs:
    """KIR's element semantics (`kir/interp/values.py`) as C++ expressions over operand
    expressions. Operands are simple names (the generator binds anything larger to a local
    first), so an operand may appear twice in a result."""

    def __init__(self, dialect: CDialect):
        self.d = dialect

    def ctype(self, dtype: str) -> str:
        return self.d.types[dtype]

    # -- literals

    def literal(self, number: int | float | bool, dtype: str) -> str:
        d = DTYPES[dtype]
        value = V.const(number, d)
        if d.kind == "bool":
            return "true" if bool(value) else "false"
        if d.is_int:
            v = int(value)
            t = self.ctype(dtype)
            if dtype == "i32":
                return str(v) if v != -(2**31) else "(-2147483647 - 1)"
            if dtype == "i64":
                return f"{v}LL" if v != -(2**63) else "(-9223372036854775807LL - 1)"
            if dtype == "u32":
                return f"{v}u"
            if dtype == "u64":
                return f"{v}ull"
            return f"(({t}){v})"
        if dtype == "f32":
            f = float(value)
            if math.isfinite(f):
                return f"{f!r}f"
            return f"kir_f32_bits({int(np.asarray(value, np.float32).view(np.uint32))}u)"
        if dtype == "f64":
            f = float(value)
            if math.isfinite(f):
                return repr(f)
            return f"kir_f64_bits({int(np.asarray(value, np.float64).view(np.uint64))}ull)"
        bits = int(np.asarray(value).view(np.uint16 if d.bits == 16 else np.uint8))
        return f"{self.d.from_bits[dtype]}({bits:#x})"

    def zero(self, dtype: str) -> str:
        return self.literal(0, dtype)

    # -- float helpers

    @staticmethod
    def compute_dtype(dtype: str) -> str:
        """Where arithmetic on a float dtype happens: f64 for f64, f32 for the rest."""
        return "f64" if dtype == "f64" else "f32"

    def widen(self, x: str, dtype: str) -> str:
        return f"{self.d.to_float[dtype]}({x})" if dtype in NARROW_FLOATS else x

    def narrow(self, x: str, dtype: str) -> str:
        return f"{self.d.from_float[dtype]}({x})" if dtype in NARROW_FLOATS else x

    # -- operators

    def binary(self, fn: str, a: str, b: str, dtype: str, rhs_const: int | None = None) -> str:
        d = DTYPES[dtype]
        if d.kind == "bool":
            return {
                "add": f"({a} != {b})",
                "sub": f"({a} != {b})",
                "mul": f"({a} && {b})",
                "div": f"({b} ? {a} : true)",
                "rem": f"({b} ? false : {a})",
                "and": f"({a} && {b})",
                "or": f"({a} || {b})",
                "xor": f"({a} != {b})",
                "shl": f"({b} ? false : {a})",
                "shr": f"({b} ? false : {a})",
                "maximum": f"({a} || {b})",
                "minimum": f"({a} && {b})",
            }[fn]
        if d.is_float:
            f64 = dtype == "f64"
            x, y = self.widen(a, dtype), self.widen(b, dtype)
            sfx = "" if f64 else "f"
            expr = {
                "add": f"{x} + {y}",
                "sub": f"{x} - {y}",
                "mul": f"{x} * {y}",
                "div": f"{x} / {y}",
                "rem": f"fmod{sfx}({x}, {y})",
                "maximum": f"kir_fmax({x}, {y})",
                "minimum": f"kir_fmin({x}, {y})",
                "pow": f"pow{sfx}({x}, {y})",
            }[fn]
            return self.narrow(expr, dtype) if dtype in NARROW_FLOATS else f"({expr})"
        t = self.ctype(dtype)
        w = "unsigned long long" if d.bits == 64 else "unsigned int"
        signed = d.kind == "int"
        if fn in ("add", "sub", "mul"):
            sym = {"add": "+", "sub": "-", "mul": "*"}[fn]
            return f"(({t})(({w}){a} {sym} ({w}){b}))"
        if fn in ("div", "rem"):
            # C's `/` and `%` are exact when the divisor is a constant other than 0 and -1
            if rhs_const is not None and rhs_const not in (0, -1):
                return f"(({t})({a} {'/' if fn == 'div' else '%'} {b}))"
            helper = (
                ("kir_sdiv" if fn == "div" else "kir_srem") if signed else ("kir_udiv" if fn == "div" else "kir_urem")
            )
            return f"{helper}<{t}>({a}, {b})"
        if fn in ("and", "or", "xor"):
            sym = {"and": "&", "or": "|", "xor": "^"}[fn]
            return f"(({t})({a} {sym} {b}))"
        if fn == "shl":
            return f"kir_shl<{t}, {w}, {d.bits}>({a}, {b})"
        if fn == "shr":
            return f"kir_shr<{t}, {d.bits}>({a}, {b})"
        if fn == "maximum":
            return f"({a} > {b} ? {a} : {b})"
        if fn == "minimum":
            return f"({a} < {b} ? {a} : {b})"
        raise ValueError(f"no integer {fn}")

    def compare(self, pred: str, a: str, b: str, dtype: str) -> str:
        sym = tl.CMP_PREDICATES[pred]
        return f"({self.widen(a, dtype)} {sym} {self.widen(b, dtype)})"

    def unary(self, fn: str, a: str, dtype: str) -> str:
        d = DTYPES[dtype]
        if fn == "not":
            return f"(!{a})" if d.kind == "bool" else f"(({self.ctype(dtype)})~{a})"
        if d.is_int:
            t = self.ctype(dtype)
            w = "unsigned long long" if d.bits == 64 else "unsigned int"
            neg = f"(({t})(0u - ({w}){a}))"
            if fn == "neg":
                return neg
            if fn == "abs":
                return a if d.kind == "uint" else f"({a} < 0 ? {neg} : {a})"
            raise ValueError(f"no integer {fn}")
        f64 = dtype == "f64"
        sfx = "" if f64 else "f"
        one = "1.0" if f64 else "1.0f"
        x = self.widen(a, dtype)
        expr = {
            "neg": f"-{x}",
            "abs": f"fabs{sfx}({x})",
            "exp": f"exp{sfx}({x})",
            "exp2": f"exp2{sfx}({x})",
            "log": f"log{sfx}({x})",
            "log2": f"log2{sfx}({x})",
            "sqrt": f"sqrt{sfx}({x})",
            "rsqrt": f"{one} / sqrt{sfx}({x})",
            "erf": f"erf{sfx}({x})",
            "sigmoid": f"{one} / (exp{sfx}(-{x}) + {one})",
            "tanh": f"tanh{sfx}({x})",
            "sin": f"sin{sfx}({x})",
            "cos": f"cos{sfx}({x})",
            "floor": f"floor{sfx}({x})",
            "ceil": f"ceil{sfx}({x})",
        }[fn]
        return self.narrow(expr, dtype) if dtype in NARROW_FLOATS else f"({expr})"

    def cast(self, a: str, src: str, dst: str) -> str:
        if src == dst:
            return a
        s, t = DTYPES[src], DTYPES[dst]
        if t.kind == "bool":
            return f"({self.widen(a, src)} != 0)"
        if s.kind == "bool":
            return f"({a} ? {self.literal(1, dst)} : {self.literal(0, dst)})"
        if s.is_float and t.is_float:
            if src == "f64":
                return f"{self.d.from_double[dst]}({a})" if dst in NARROW_FLOATS else f"((float){a})"
            wide = self.widen(a, src)  # exact
            if dst == "f64":
                return f"((double){wide})"
            return self.narrow(wide, dst) if dst in NARROW_FLOATS else wide
        if s.is_float:
            info = np.iinfo(t.numpy)
            lo, hi = self.literal(int(info.min), dst), self.literal(int(info.max), dst)
            return f"kir_f2i<{self.ctype(dst)}>((double){self.widen(a, src)}, {lo}, {hi})"
        if t.is_float:
            # integers convert through f64, then round once (as the interpreter does)
            if dst in NARROW_FLOATS:
                return f"{self.d.from_double[dst]}((double){a})"
            return f"(({self.ctype(dst)})(double){a})"
        return f"(({self.ctype(dst)}){a})"  # integer to integer wraps

    def rand(self, fn: str, seed: str, seed_dtype: str, offset: str, offset_dtype: str) -> str:
        """`rand` / `randint` (kir.random): the seed widened to 64 bits as its signedness says,
        the counter's low word and, for a 64-bit offset, its high word."""
        wide = "(unsigned long long)(long long)" if DTYPES[seed_dtype].kind == "int" else "(unsigned long long)"
        hi = f"(unsigned int)((unsigned long long){offset} >> 32)" if DTYPES[offset_dtype].bits == 64 else "0u"
        return f"kir_{fn}({wide}{seed}, (unsigned int){offset}, {hi})"


# ---- the helpers every C++ kernel carries ------------------------------------------------------

COMMON_HELPERS = r"""
#define KIR_DEV __device__ __forceinline__

KIR_DEV float kir_f32_bits(unsigned int b) { return __uint_as_float(b); }
KIR_DEV double kir_f64_bits(unsigned long long b) { return __longlong_as_double((long long)b); }
// maximum/minimum propagate NaN (the first NaN operand wins), as numpy's do
KIR_DEV float kir_fmax(float a, float b) { return a != a ? a : (b != b ? b : fmaxf(a, b)); }
KIR_DEV float kir_fmin(float a, float b) { return a != a ? a : (b != b ? b : fminf(a, b)); }
KIR_DEV double kir_fmax(double a, double b) { return a != a ? a : (b != b ? b : fmax(a, b)); }
KIR_DEV double kir_fmin(double a, double b) { return a != a ? a : (b != b ? b : fmin(a, b)); }
// C division: truncation toward zero; x / 0 is all ones and x % 0 is x (as PTX div does);
// the most negative value divided by -1 wraps
template <typename T> KIR_DEV T kir_sdiv(T a, T b) {
    if (b == 0) return (T)-1;
    if (b == (T)-1) return (T)(0ull - (unsigned long long)a);
    return (T)(a / b);
}
template <typename T> KIR_DEV T kir_srem(T a, T b) {
    if (b == 0) return a;
    if (b == (T)-1) return (T)0;
    return (T)(a % b);
}
template <typename T> KIR_DEV T kir_udiv(T a, T b) { return b == 0 ? (T)~(T)0 : (T)(a / b); }
template <typename T> KIR_DEV T kir_urem(T a, T b) { return b == 0 ? a : (T)(a % b); }
// shifts take the amount as unsigned: by the width or more, << gives 0 and >> the sign fill
template <typename T, typename W, int BITS> KIR_DEV T kir_shl(T a, T b) {
    unsigned long long n = (unsigned long long)(long long)b;
    return n >= BITS ? (T)0 : (T)((W)a << n);
}
template <typename T, int BITS> KIR_DEV T kir_shr(T a, T b) {
    unsigned long long n = (unsigned long long)(long long)b;
    if (n >= BITS) return (T)((T)-1 < (T)0 && a < (T)0 ? (T)-1 : (T)0);
    return (T)(a >> n);
}
// float to integer: truncate toward zero, saturate, NaN gives 0
template <typename T> KIR_DEV T kir_f2i(double x, T lo, T hi) {
    if (x != x) return (T)0;
    if (x >= (double)hi) return hi;
    if (x <= (double)lo) return lo;
    return (T)trunc(x);
}
// rand / randint: Philox4x32 with 10 rounds, keyed by the seed, counting by the offset
// (Triton's tl.randint / tl.rand, bit for bit; kir/random.py)
KIR_DEV unsigned int kir_randint(unsigned long long seed, unsigned int lo, unsigned int hi) {
    unsigned int c0 = lo, c1 = hi, c2 = 0u, c3 = 0u;
    unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
    for (int r = 0; r < 10; ++r) {
        const unsigned long long p0 = (unsigned long long)c0 * 0xD2511F53u;
        const unsigned long long p2 = (unsigned long long)c2 * 0xCD9E8D57u;
        c0 = (unsigned int)(p2 >> 32) ^ c1 ^ k0;
        c1 = (unsigned int)p2;
        c2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1;
        c3 = (unsigned int)p0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c0;
}
KIR_DEV float kir_rand(unsigned long long seed, unsigned int lo, unsigned int hi) {
    const int x = (int)kir_randint(seed, lo, hi);
    return (float)(x < 0 ? ~x : x) * 4.6566127342e-10f;
}
template <typename To, typename From> KIR_DEV To kir_bitcast(From x) {
    To r;
    memcpy(&r, &x, sizeof(To));
    return r;
}
"""

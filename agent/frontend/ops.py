"""What the frontend knows of PyTorch's ops: the canonical name of an fx node's op, its
arguments by name, and the elementwise ones as KIR expressions on f32 values.

One name per op whichever way the module calls it (`torch.relu(x)`, `F.relu(x)`, `x.relu()`,
`nn.ReLU()`, `operator.add`, `torch.add`, `x.add(y)`): `canonical(node, traced)` gives it with
the arguments of the module's call (a `torch.nn` module's settings become keyword arguments).
"""

from __future__ import annotations

import math
import operator
from typing import Any

from agent.frontend.trace import meta

# fx call_function targets whose __name__ is not the op's canonical name
_FUNCTIONS: dict[Any, str] = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.truediv: "div",
    operator.neg: "neg",
    operator.getitem: "getitem",
    operator.matmul: "matmul",
    operator.pow: "pow",
}
_ALIASES = {
    "multiply": "mul",
    "divide": "div",
    "true_divide": "div",
    "subtract": "sub",
    "negative": "neg",
    "clip": "clamp",
    "clamp_min": "clamp",
    "clamp_max": "clamp",
    "amax": "max",
    "amin": "min",
    "swish": "silu",
    "mm": "matmul",
    "bmm": "matmul",
    "hardtanh": "clamp",
    "sigmoid_": "sigmoid",
    "relu_": "relu",
    "special_expit": "sigmoid",
}

# positional parameters of each op, for `arg`
SIGNATURES: dict[str, tuple[str, ...]] = {
    "add": ("input", "other", "alpha"),
    "sub": ("input", "other", "alpha"),
    "rsub": ("input", "other", "alpha"),
    "mul": ("input", "other"),
    "div": ("input", "other"),
    "maximum": ("input", "other"),
    "minimum": ("input", "other"),
    "pow": ("input", "exponent"),
    "clamp": ("input", "min", "max"),
    "leaky_relu": ("input", "negative_slope"),
    "elu": ("input", "alpha"),
    "gelu": ("input",),
    "softplus": ("input", "beta", "threshold"),
    "sum": ("input", "dim", "keepdim"),
    "mean": ("input", "dim", "keepdim"),
    "max": ("input", "dim", "keepdim"),
    "min": ("input", "dim", "keepdim"),
    "prod": ("input", "dim", "keepdim"),
    "argmax": ("input", "dim", "keepdim"),
    "argmin": ("input", "dim", "keepdim"),
    "logsumexp": ("input", "dim", "keepdim"),
    "var": ("input", "dim", "unbiased", "keepdim"),
    "std": ("input", "dim", "unbiased", "keepdim"),
    "norm": ("input", "p", "dim", "keepdim"),
    "softmax": ("input", "dim"),
    "log_softmax": ("input", "dim"),
    "cumsum": ("input", "dim"),
    "cumprod": ("input", "dim"),
    "layer_norm": ("input", "normalized_shape", "weight", "bias", "eps"),
    "normalize": ("input", "p", "dim", "eps"),
    "linear": ("input", "weight", "bias"),
    "matmul": ("input", "other"),
    "getitem": ("input", "index"),
    "flip": ("input", "dims"),
    "cosine_similarity": ("input", "other", "dim", "eps"),
    "mse_loss": ("input", "target", "size_average", "reduce", "reduction"),
    "l1_loss": ("input", "target", "size_average", "reduce", "reduction"),
    "smooth_l1_loss": ("input", "target", "size_average", "reduce", "reduction", "beta"),
    "huber_loss": ("input", "target", "reduction", "delta"),
    "kl_div": ("input", "target", "size_average", "reduce", "reduction", "log_target"),
    "cross_entropy": ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction"),
    "dropout": ("input", "p", "training"),
    "transpose": ("input", "dim0", "dim1"),
}


def canonical(node, traced) -> tuple[str, dict[str, Any]]:
    """(op name, arguments by name) of an fx node; a module call gives its settings too."""
    import torch.nn as nn

    if node.op == "call_module":
        module = traced.module(node)
        kind = type(module).__name__
        x = node.args[0] if node.args else None
        simple = {"ReLU": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "SiLU": "silu", "Identity": "identity",
                  "Mish": "mish", "Hardsigmoid": "hardsigmoid", "Hardswish": "hardswish", "SELU": "selu",
                  "Softsign": "softsign", "Tanhshrink": "tanhshrink"}  # fmt: skip
        if kind in simple:
            return simple[kind], {"input": x}
        if isinstance(module, nn.GELU):
            return "gelu", {"input": x, "approximate": module.approximate}
        if isinstance(module, nn.LeakyReLU):
            return "leaky_relu", {"input": x, "negative_slope": module.negative_slope}
        if isinstance(module, nn.ELU):
            return "elu", {"input": x, "alpha": module.alpha}
        if isinstance(module, nn.Hardtanh):
            return "clamp", {"input": x, "min": module.min_val, "max": module.max_val}
        if isinstance(module, nn.Softplus):
            return "softplus", {"input": x, "beta": module.beta, "threshold": module.threshold}
        if isinstance(module, nn.Softmax | nn.LogSoftmax):
            return ("softmax" if isinstance(module, nn.Softmax) else "log_softmax"), {"input": x, "dim": module.dim}
        if isinstance(module, nn.LayerNorm):
            return "layer_norm", {
                "input": x, "normalized_shape": tuple(module.normalized_shape), "eps": module.eps,
                "weight": f"{node.target}.weight" if module.weight is not None else None,
                "bias": f"{node.target}.bias" if module.bias is not None else None,
            }  # fmt: skip
        if isinstance(module, nn.Linear):
            return "linear", {
                "input": x, "weight": f"{node.target}.weight",
                "bias": f"{node.target}.bias" if module.bias is not None else None,
            }  # fmt: skip
        if isinstance(module, nn.InstanceNorm1d | nn.InstanceNorm2d | nn.InstanceNorm3d) and not module.affine:
            if module.track_running_stats:
                return f"nn.{kind}", {"input": x}
            spatial = {"InstanceNorm1d": 1, "InstanceNorm2d": 2, "InstanceNorm3d": 3}[kind]
            # per (batch, channel) over the spatial dimensions: a LayerNorm of the trailing ones
            return "layer_norm", {"input": x, "normalized_shape": (0,) * spatial, "eps": module.eps}
        if isinstance(module, nn.AdaptiveAvgPool1d | nn.AdaptiveAvgPool2d | nn.AdaptiveAvgPool3d):
            size = module.output_size
            spatial = {"AdaptiveAvgPool1d": 1, "AdaptiveAvgPool2d": 2, "AdaptiveAvgPool3d": 3}[kind]
            if all(v == 1 for v in (size if isinstance(size, tuple | list) else [size])):
                return "mean", {"input": x, "dim": tuple(range(-spatial, 0)), "keepdim": True}
        if isinstance(module, nn.BatchNorm1d) and (module.training or not module.track_running_stats):
            m = meta(x) if hasattr(x, "meta") else None
            rank = len(m[0]) if m else 2
            return "batch_norm", {
                "input": x, "dim": 0 if rank == 2 else (0, 2), "eps": module.eps,
                "weight": f"{node.target}.weight" if module.affine else None,
                "bias": f"{node.target}.bias" if module.affine else None,
            }  # fmt: skip
        if isinstance(module, nn.Dropout):
            return "dropout", {"input": x, "p": module.p, "training": module.training}
        return f"nn.{kind}", {"input": x}
    target_name = str(getattr(node.target, "__name__", node.target))
    name: str = _FUNCTIONS.get(node.target, target_name) if node.op == "call_function" else str(node.target)
    name = _ALIASES.get(name, name)
    args: dict[str, Any] = {}
    params = SIGNATURES.get(name, ("input",) + tuple(f"arg{i}" for i in range(1, 8)))
    for i, value in enumerate(node.args):
        args[params[i] if i < len(params) else f"arg{i}"] = value
    args.update(node.kwargs)
    if target_name == "clamp_max" and "max" not in args:  # its one setting came in as `min`
        args["max"] = args.pop("min", None)
    return name, args


def literal(x: float | int | bool) -> str:
    """A Python number as a KIR f32 literal."""
    if isinstance(x, bool):
        return "1.0" if x else "0.0"
    value = float(x)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(value)
    return text if ("." in text or "e" in text or "n" in text) else text + ".0"


# elementwise ops of one f32 value `v` (the KIR expression written in {v}); settings in {...}
UNARY: dict[str, str] = {
    "relu": "maximum({v}, 0.0)",
    "sigmoid": "sigmoid({v})",
    "tanh": "tanh({v})",
    "exp": "exp({v})",
    "log": "log({v})",
    "sqrt": "sqrt({v})",
    "rsqrt": "rsqrt({v})",
    "abs": "abs({v})",
    "neg": "-({v})",
    "sin": "sin({v})",
    "cos": "cos({v})",
    "floor": "floor({v})",
    "ceil": "ceil({v})",
    "square": "{v} * {v}",
    "reciprocal": "1.0 / {v}",
    "silu": "{v} * sigmoid({v})",
    "mish": "{v} * tanh(where({v} > 20.0, {v}, log(1.0 + exp(minimum({v}, 20.0)))))",
    "hardsigmoid": "minimum(maximum({v} / 6.0 + 0.5, 0.0), 1.0)",
    "hardswish": "{v} * minimum(maximum({v} / 6.0 + 0.5, 0.0), 1.0)",
    "selu": "1.0507009873554805 * where({v} > 0.0, {v}, 1.6732632423543772 * (exp(minimum({v}, 0.0)) - 1.0))",
    "softsign": "{v} / (1.0 + abs({v}))",
    "tanhshrink": "{v} - tanh({v})",
    "identity": "{v}",
    "contiguous": "{v}",
}


def unary(name: str, v: str, args: dict[str, Any]) -> str | None:
    """The KIR expression of a one-value elementwise op on `v`, or None if it is not one (or
    has a setting that is not a number)."""
    if name in UNARY:
        return UNARY[name].format(v=v)
    if name == "gelu":
        if args.get("approximate", "none") == "tanh":
            return f"0.5 * {v} * (1.0 + tanh(0.7978845608028654 * ({v} + 0.044715 * {v} * {v} * {v})))"
        return f"0.5 * {v} * (1.0 + erf({v} * 0.7071067811865476))"
    if name == "leaky_relu":
        slope = args.get("negative_slope", 0.01)
        return f"where({v} > 0.0, {v}, {v} * {literal(slope)})" if _number(slope) else None
    if name == "elu":
        alpha = args.get("alpha", 1.0)
        return f"where({v} > 0.0, {v}, {literal(alpha)} * (exp(minimum({v}, 0.0)) - 1.0))" if _number(alpha) else None
    if name == "softplus":
        beta, threshold = args.get("beta", 1.0), args.get("threshold", 20.0)
        if not (_number(beta) and _number(threshold)):
            return None
        b, t = literal(beta), literal(threshold)
        return f"where({v} * {b} > {t}, {v}, log(1.0 + exp(minimum({v} * {b}, {t}))) / {b})"
    if name == "clamp":
        lo, hi = args.get("min"), args.get("max")
        if (lo is not None and not _number(lo)) or (hi is not None and not _number(hi)):
            return None
        out = v
        if lo is not None:
            out = f"maximum({out}, {literal(lo)})"
        if hi is not None:
            out = f"minimum({out}, {literal(hi)})"
        return out
    return None


def _number(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


BINARY = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})",
          "maximum": "maximum({a}, {b})", "minimum": "minimum({a}, {b})", "pow": "pow({a}, {b})"}  # fmt: skip

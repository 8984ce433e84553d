"""Memory in C++: one address per element, loads, stores and atomics (a CAS loop where the
hardware lacks the operation)."""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from kir.dialect import tile as tl
from kir.dialect.types import GlobalType, SmemType, TileType, dtype_of, shape_of
from kir.dtypes import DTYPES
from lowering.emit.cbase.dialect import _UNSIGNED_OF, Unsupported
from lowering.emit.cbase.values import Cyclic, GlobalArg, Tile


class Memory:
    """The memory ops of `KernelGen`."""

    def global_arg(self, v: SSAValue) -> GlobalArg:
        g = self.globals.get(v)
        if g is None:
            raise Unsupported(self.current_op, "internal: not a kernel argument")
        return g

    def element_ref(
        self,
        op: Operation,
        mem: SSAValue,
        access,
        indices,
        idx: list[str],
        shape: tuple[int, ...],
        layout: object = None,
    ) -> str:
        """The C++ lvalue of the element at `idx` of an access of shape `shape`, whose loop runs
        over `layout` (index tiles of a gather are read at the element)."""
        coords = self.coords(access, indices, idx, shape, len(shape_of(mem.type)), layout)
        if isinstance(mem.type, GlobalType):
            g = self.global_arg(mem)
            terms = []
            for cexpr, stride in zip(coords, g.strides, strict=True):
                s = self.c_sym(stride)
                terms.append(f"(long long)({cexpr})" + ("" if s == "1" else f" * {s}"))
            return f"{g.name}[{' + '.join(terms)}]"
        if isinstance(mem.type, SmemType):
            return self.smem_ref(mem, coords)
        raise Unsupported(op, f"cannot access {mem.type}")

    def coords(self, access, indices, idx: list[str], shape: tuple[int, ...], rank: int, layout: object) -> list[str]:
        """One C++ index per dimension of the memory: point indices (a scalar, or the index
        tile's element for a gather), slice starts plus the element's position, and the
        element's position in the trailing whole dimensions of a shared buffer."""
        out = []
        pos = 0
        indices = list(indices)
        for d in range(rank):
            if d < len(access.dims):
                v = indices[d]
                if access.dims[d] is None:
                    out.append(self.fetch(v, shape, layout, idx))
                else:
                    out.append(f"{self.val(v).name} + {idx[pos]}")
                    pos += 1
            else:
                out.append(idx[pos])
                pos += 1
        return out

    def smem_ref(self, mem: SSAValue, coords: list[str]) -> str:
        raise Unsupported(self.current_op, "shared buffers belong to the hardware-explicit level")

    def access_shape(self, op: Operation) -> tuple[int, ...]:
        return tuple(self.static(d, "the access extent") for d in op.shape)

    def mask_at(self, op: Operation, shape: tuple[int, ...], layout: object, idx: list[str]) -> str | None:
        if op.mask is None:
            return None
        return self.fetch(op.mask, shape, layout, idx)

    def memory_operands(self, op: Operation) -> list[SSAValue]:
        vals = [v for v in op.indices if isinstance(v.type, TileType)]
        if op.mask is not None:
            vals.append(op.mask)
        return vals

    def op_load(self, op: tl.LoadOp) -> None:
        shape = self.access_shape(op)
        c = self.c
        dt = dtype_of(op.res.type)
        other = self.val(op.other).name if op.other is not None else c.zero(dt)
        if not shape:
            ref = self.evicting(op, self.element_ref(op, op.mem, op.access.data, op.indices, [], ()))
            self.load_scalar(op, ref, None if op.mask is None else self.val(op.mask).name, other)
            return
        x = self.declare(op.res, op)
        assert isinstance(x, Tile)
        staged = self.begin_exchange(self.memory_operands(op), shape, x.layout, op)
        idx, _, closers = self.open_slots(x.layout, shape, op)
        mask = self.mask_at(op, shape, x.layout, idx)
        ref = self.evicting(op, self.element_ref(op, op.mem, op.access.data, op.indices, idx, shape, x.layout))
        self.w.line(self.load_element(op, f"{x.name}[kir_i]", ref, mask, other), op)
        self.close(closers)
        self.end_exchange(staged, op)

    def evicting(self, op: tl.LoadOp, ref: str) -> str:
        """The read of global element `ref` under the load's `evict` policy. The policy changes
        no value; a target without one (HIP, the MTIA simulator) reads `ref` as it is."""
        return ref

    def load_scalar(self, op: tl.LoadOp, ref: str, mask: str | None, other: str) -> None:
        """Define the result of a scalar load: element `ref`, or `other` where `mask` is false."""
        self.define_scalar(op.res, ref if mask is None else f"({mask} ? {ref} : {other})", op)

    def load_element(self, op: tl.LoadOp, dst: str, ref: str, mask: str | None, other: str) -> str:
        """The statement that loads element `ref` into `dst`, or `other` where `mask` is false."""
        if mask is None:
            return f"{dst} = {ref};"
        return f"{dst} = {mask} ? {ref} : {other};"

    def effect_open(self, op: Operation) -> int:
        """Open the guard of an effect performed once per unit (by its elected thread)."""
        if self.instance.single:
            return 0
        self.w.line(f"if ({self.instance.elect}) {{", op)
        self.w.indent()
        return 1

    def op_store(self, op: tl.StoreOp) -> None:
        shape = self.access_shape(op)
        value = self.val(op.value)
        if not shape:
            closers = self.effect_open(op)
            ref = self.element_ref(op, op.mem, op.access.data, op.indices, [], ())
            line = f"{ref} = {value.name};"
            if op.mask is not None:
                line = f"if ({self.val(op.mask).name}) {line}"
            self.w.line(line, op)
            self.close(closers)
            return
        # the loop runs over the value's own layout when it has the access shape
        same = isinstance(value, Tile) and value.shape == shape
        layout = value.layout if same else Cyclic(self.instance.threads, self.instance.tid)
        self.store_tile(op, shape, layout)

    def store_tile(self, op: tl.StoreOp, shape: tuple[int, ...], layout: object) -> None:
        staged = self.begin_exchange([op.value, *self.memory_operands(op)], shape, layout, op)
        idx, _, closers = self.open_slots(layout, shape, op)
        val = self.fetch(op.value, shape, layout, idx)
        mask = self.mask_at(op, shape, layout, idx)
        ref = self.element_ref(op, op.mem, op.access.data, op.indices, idx, shape, layout)
        self.w.line(f"{'if (' + mask + ') ' if mask else ''}{ref} = {val};", op)
        self.close(closers)
        self.end_exchange(staged, op)

    def op_atomic(self, op: tl.AtomicOp) -> None:
        shape = self.access_shape(op)
        dt = dtype_of(op.mem.type)
        if DTYPES[dt].nbytes < 2:
            raise Unsupported(
                op,
                f"atomic_{op.fn.data} on {dt} (1-byte elements) is not supported by the {self.dialect.name} backend",
                "use a 16-, 32- or 64-bit dtype",
            )
        if not shape:
            self.require_sync("a scalar atomic (its old value goes to every thread)")
            res = self.declare(op.res, op)
            self.w.line("{", op)
            self.w.indent()
            ptr = self.scratch(self.c.ctype(dt), 1, DTYPES[dt].nbytes)
            self.w.line(f"if ({self.instance.elect}) {{", op)
            self.w.indent()
            ref = self.element_ref(op, op.mem, op.access.data, op.indices, [], ())
            mask = self.val(op.mask).name if op.mask is not None else None
            self.atomic_line(op, f"{ptr}[0]", ref, self.val(op.value).name, dt, mask)
            self.close(1)
            self.sync(op)
            self.w.line(f"{res.name} = {ptr}[0];", op)
            self.sync(op)
            self.w.dedent()
            self.w.line("}", op)
            self.scratch_top = 0
            return
        x = self.declare(op.res, op)
        assert isinstance(x, Tile)
        staged = self.begin_exchange([op.value, *self.memory_operands(op)], shape, x.layout, op)
        idx, _, closers = self.open_slots(x.layout, shape, op)
        val = self.fetch(op.value, shape, x.layout, idx)
        mask = self.mask_at(op, shape, x.layout, idx)
        ref = self.element_ref(op, op.mem, op.access.data, op.indices, idx, shape, x.layout)
        self.atomic_line(op, f"{x.name}[kir_i]", ref, val, dt, mask)
        self.close(closers)
        self.end_exchange(staged, op)

    def atomic_line(self, op: tl.AtomicOp, dst: str, ref: str, val: str, dt: str, mask: str | None) -> None:
        """`dst = old value` after the read-modify-write of `ref` (a CAS loop, except where the
        hardware has the operation)."""
        w = self.w
        fn = op.fn.data
        ct = self.c.ctype(dt)
        native = {
            ("add", "f32"): "float",
            ("add", "f64"): "double",
            ("add", "i32"): "int",
            ("add", "u32"): "unsigned int",
            ("add", "u64"): "unsigned long long",
            ("add", "i64"): "unsigned long long",
            ("max", "i32"): "int",
            ("max", "u32"): "unsigned int",
            ("max", "i64"): "long long",
            ("max", "u64"): "unsigned long long",
            ("min", "i32"): "int",
            ("min", "u32"): "unsigned int",
            ("min", "i64"): "long long",
            ("min", "u64"): "unsigned long long",
            ("xchg", "f32"): "float",
            ("xchg", "i32"): "int",
            ("xchg", "u32"): "unsigned int",
            ("xchg", "u64"): "unsigned long long",
        }
        intrinsic = {"add": "atomicAdd", "max": "atomicMax", "min": "atomicMin", "xchg": "atomicExch"}[fn]
        if mask is not None:
            w.line(f"{dst} = {self.c.zero(dt)};", op)
            w.line(f"if ({mask}) {{", op)
            w.indent()
        key = (fn, dt)
        if key in native:
            carrier = native[key]
            w.line(f"{dst} = ({ct}){intrinsic}(reinterpret_cast<{carrier}*>(&{ref}), ({carrier}){val});", op)
        else:
            bits = DTYPES[dt].bits
            ut = _UNSIGNED_OF[bits]
            cas_t = "unsigned short" if bits == 16 else ut
            combine = {"add": "add", "max": "maximum", "min": "minimum", "xchg": None}[fn]
            w.line("{", op)
            w.indent()
            w.line(f"{cas_t}* kir_p = reinterpret_cast<{cas_t}*>(&{ref});", op)
            w.line(f"{cas_t} kir_old = *kir_p, kir_seen;", op)
            w.line("do {", op)
            w.indent()
            w.line("kir_seen = kir_old;", op)
            w.line(f"const {ct} kir_o = kir_bitcast<{ct}>(kir_seen);", op)
            w.line(f"const {ct} kir_v = {val};", op)
            new = "kir_v" if combine is None else self.c.binary(combine, "kir_o", "kir_v", dt)
            w.line(f"kir_old = atomicCAS(kir_p, kir_seen, kir_bitcast<{cas_t}>({new}));", op)
            w.dedent()
            w.line("} while (kir_old != kir_seen);", op)
            w.line(f"{dst} = kir_bitcast<{ct}>(kir_seen);", op)
            w.dedent()
            w.line("}", op)
        if mask is not None:
            self.close(1)

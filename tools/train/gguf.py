# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""Minimal GGUF v3 reader/writer and the Q8_0 reference quantizer, in numpy.

Development tool for the embedded model (issue 7): the exporter writes the shipped
model with it and the checks read GGUF files back with it. Spec: shared/docs/formats.md
§1 (container: little-endian, alignment 32 unless general.alignment says otherwise,
tensor offsets exactly contiguous, each tensor padded with zeros to the alignment,
including the last one) and §2.5 (Q8_0: d = amax/127 in fp32, q = roundf(x/d) with
ties away from zero, d stored as fp16 rounded to nearest even).
Invariants: the writer emits tensors in the order given, with n_dims = len(shape) and
shape in ggml order (ne[0] = contiguous dimension). Checked bit-for-bit against
shared/testdata/quant/q8_0.qv by check_tools.py.
Non-goals: other quant types, big-endian files, general.alignment other than 32 on write.
"""
import struct

import numpy as np

GGUF_MAGIC = b'GGUF'
ALIGN = 32

# metadata value types (formats.md §1.2)
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
_SCALAR = {T_U8: '<B', T_I8: '<b', T_U16: '<H', T_I16: '<h', T_U32: '<I', T_I32: '<i',
           T_F32: '<f', T_BOOL: '<?', T_U64: '<Q', T_I64: '<q', T_F64: '<d'}
_NP = {T_U8: '<u1', T_I8: '<i1', T_U16: '<u2', T_I16: '<i2', T_U32: '<u4', T_I32: '<i4',
       T_F32: '<f4', T_BOOL: '<u1', T_U64: '<u8', T_I64: '<i8', T_F64: '<f8'}

# ggml tensor types used here (formats.md §1.4)
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
_BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_Q8_0: (32, 34)}


def pad(n, a=ALIGN):
    return (n + a - 1) // a * a


# ---- Q8_0 ----

def roundf(v):
    """C roundf on float32 values: nearest integer, ties away from zero (exact in fp32)."""
    a = np.abs(v)
    r = np.floor(a)
    r = r + (a - r >= np.float32(0.5))
    return np.copysign(r, v)


def quantize_q8_0(x):
    """x: float32 array whose last dim is a multiple of 32 -> bytes (formats.md §2.5)."""
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, 32)
    amax = np.max(np.abs(x), axis=1)
    d = (amax / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide='ignore'):
        idv = np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, np.float32(1.0)), np.float32(0.0))
    idv = idv.astype(np.float32)
    q = roundf((x * idv[:, None]).astype(np.float32)).astype(np.int8)
    out = np.empty((x.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = d.astype('<f2').view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def dequantize_q8_0(buf, n):
    b = np.frombuffer(buf, dtype=np.uint8, count=n // 32 * 34).reshape(-1, 34)
    d = b[:, 0:2].copy().view('<f2').astype(np.float32)
    q = b[:, 2:].view(np.int8).astype(np.float32)
    return (q * d).reshape(-1)


# ---- writer ----

class Writer:
    """Collects KVs and tensors, then writes one GGUF v3 file."""

    def __init__(self):
        self.kv = []       # (key, type, value, elem_type)
        self.tensors = []  # (name, shape_ggml, ggml_type, bytes)

    def add(self, key, vtype, value):
        self.kv.append((key, vtype, value, None))

    def add_array(self, key, elem_type, values):
        self.kv.append((key, T_ARR, list(values), elem_type))

    def add_tensor(self, name, array, ggml_type):
        """array: numpy array in PyTorch/row-major order; ggml shape = reversed(array.shape)."""
        a = np.ascontiguousarray(array, dtype=np.float32)
        shape = list(reversed(a.shape))
        if len(name) >= 64:
            raise ValueError(f'tensor name too long: {name}')
        if ggml_type == GGML_F32:
            data = a.astype('<f4').tobytes()
        elif ggml_type == GGML_F16:
            data = a.astype('<f2').tobytes()
        elif ggml_type == GGML_Q8_0:
            if shape[0] % 32:
                raise ValueError(f'{name}: ne0 {shape[0]} not a multiple of 32')
            data = quantize_q8_0(a)
        else:
            raise ValueError(f'unsupported type {ggml_type}')
        self.tensors.append((name, shape, ggml_type, data))

    @staticmethod
    def _str(s):
        b = s.encode('utf-8') if isinstance(s, str) else bytes(s)
        return struct.pack('<Q', len(b)) + b

    def _value(self, vtype, v):
        if vtype == T_STR:
            return self._str(v)
        return struct.pack(_SCALAR[vtype], v)

    def write(self, path):
        out = bytearray()
        out += GGUF_MAGIC + struct.pack('<Iqq', 3, len(self.tensors), len(self.kv))
        for key, vtype, value, et in self.kv:
            out += self._str(key) + struct.pack('<i', vtype)
            if vtype == T_ARR:
                out += struct.pack('<iQ', et, len(value))
                if et == T_STR:
                    for s in value:
                        out += self._str(s)
                else:
                    out += np.asarray(value, dtype=_NP[et]).tobytes()
            else:
                out += self._value(vtype, value)
        off = 0
        for name, shape, gt, data in self.tensors:
            out += self._str(name) + struct.pack('<I', len(shape))
            out += struct.pack(f'<{len(shape)}q', *shape)
            out += struct.pack('<iQ', gt, off)
            off += pad(len(data))
        out += b'\0' * (pad(len(out)) - len(out))
        for _, _, _, data in self.tensors:
            out += data + b'\0' * (pad(len(data)) - len(data))
        with open(path, 'wb') as f:
            f.write(out)
        return len(out)


# ---- reader ----

class Reader:
    """Parses a whole GGUF file: .kv {key: value}, .tensors {name: (shape, type, abs_offset)}."""

    def __init__(self, path):
        with open(path, 'rb') as f:
            self.buf = f.read()
        self.pos = 0
        if self._take(4) != GGUF_MAGIC:
            raise ValueError(f'{path}: bad magic')
        ver, n_t, n_kv = struct.unpack('<Iqq', self._take(20))
        if ver not in (2, 3):
            raise ValueError(f'{path}: version {ver}')
        self.kv = {}
        for _ in range(n_kv):
            key = self._s()
            (vt,) = struct.unpack('<i', self._take(4))
            self.kv[key] = self._val(vt)
        align = self.kv.get('general.alignment', ALIGN)
        infos = []
        for _ in range(n_t):
            name = self._s()
            (nd,) = struct.unpack('<I', self._take(4))
            shape = list(struct.unpack(f'<{nd}q', self._take(8 * nd)))
            gt, off = struct.unpack('<iQ', self._take(12))
            infos.append((name, shape, gt, off))
        data0 = pad(self.pos, align)
        self.tensors = {}
        expect = 0
        for name, shape, gt, off in infos:
            if off != expect:
                raise ValueError(f'{name}: offset {off}, expected {expect}')
            blk, sz = _BLOCK.get(gt, (None, None))
            n = int(np.prod(shape))
            nbytes = n // blk * sz if blk else 0
            self.tensors[name] = (shape, gt, data0 + off)
            expect += pad(nbytes, align)

    def _take(self, n):
        b = self.buf[self.pos:self.pos + n]
        if len(b) != n:
            raise ValueError('truncated')
        self.pos += n
        return b

    def _s(self):
        (n,) = struct.unpack('<Q', self._take(8))
        return self._take(n).decode('utf-8', errors='surrogateescape')

    def _val(self, vt):
        if vt == T_STR:
            return self._s()
        if vt == T_ARR:
            et, n = struct.unpack('<iQ', self._take(12))
            if et == T_STR:
                return [self._s() for _ in range(n)]
            dt = np.dtype(_NP[et])
            return np.frombuffer(self._take(n * dt.itemsize), dtype=dt).copy()
        (v,) = struct.unpack(_SCALAR[vt], self._take(struct.calcsize(_SCALAR[vt])))
        return v

    def tensor(self, name):
        """-> float32 array in row-major order, shape = reversed(ggml shape)."""
        shape, gt, off = self.tensors[name]
        n = int(np.prod(shape))
        if gt == GGML_F32:
            a = np.frombuffer(self.buf, dtype='<f4', count=n, offset=off).astype(np.float32)
        elif gt == GGML_F16:
            a = np.frombuffer(self.buf, dtype='<f2', count=n, offset=off).astype(np.float32)
        elif gt == GGML_Q8_0:
            a = dequantize_q8_0(self.buf[off:off + n // 32 * 34], n)
        else:
            raise ValueError(f'{name}: unsupported type {gt}')
        return a.reshape(list(reversed(shape)))

    def tensor_type(self, name):
        return self.tensors[name][1]

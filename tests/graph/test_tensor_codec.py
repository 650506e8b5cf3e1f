"""The numpy TensorProto codec against TensorFlow's own tensor_util, on many dtypes and shapes."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
from tensorflow.python.framework import tensor_util  # noqa: E402

from scopefusion.core.graph.tensor_codec import UnsupportedDtype, make_ndarray, make_tensor_proto  # noqa: E402

SHAPES = [(), (1,), (2,), (3, 4), (2, 1, 3), (0,), (4, 0, 2), (1, 1, 1, 5)]
DTYPES = [np.float16, np.float32, np.float64, tf.bfloat16.as_numpy_dtype, np.int8, np.int16, np.int32,
          np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128]


def _values(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    raw = rng.normal(size=shape) * 50
    if np.dtype(dtype) == np.bool_:
        return raw > 0
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if np.dtype(dtype).kind == "c":
        return (raw + 1j * rng.normal(size=shape)).astype(dtype)
    return raw.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_encoding_is_tensor_utils(dtype, shape):
    value = _values(dtype, shape, zlib.crc32(f"{np.dtype(dtype).name}{shape}".encode()))
    ours = make_tensor_proto(value)
    theirs = tensor_util.make_tensor_proto(value)
    assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(deterministic=True)
    decoded = make_ndarray(ours)
    assert decoded.dtype == np.dtype(dtype) and decoded.shape == shape
    assert decoded.tobytes() == np.ascontiguousarray(value).tobytes()  # bit for bit (NaN included)


def test_strings_are_tensor_utils():
    value = np.array([[b"a", b"bc"], [b"", b"\xff\x00"]], dtype=object)
    ours = make_tensor_proto(value)
    assert ours.SerializeToString() == tensor_util.make_tensor_proto(value).SerializeToString()
    np.testing.assert_array_equal(make_ndarray(ours), tensor_util.MakeNdarray(ours))


def _typed(dtype, shape, field, stored):
    proto = tf.make_tensor_proto(np.zeros((), dtype)).__class__(dtype=tf.as_dtype(dtype).as_datatype_enum)
    for size in shape:
        proto.tensor_shape.dim.add(size=size)
    getattr(proto, field).extend(stored)
    return proto


@pytest.mark.parametrize("dtype,field,stored", [
    (np.float32, "float_val", [1.5, -2.0, 3.25]),
    (np.float64, "double_val", [0.1, 7.0]),
    (np.int32, "int_val", [5, -3]),
    (np.int8, "int_val", [-7]),
    (np.uint8, "int_val", [200, 1, 2]),
    (np.int64, "int64_val", [2**40, -1]),
    (np.uint32, "uint32_val", [2**31 + 5]),
    (np.uint64, "uint64_val", [2**63 + 9, 4]),
    (np.bool_, "bool_val", [True, False]),
    (np.float16, "half_val", [np.float16(1.5).view(np.uint16).item(), np.float16(-0.25).view(np.uint16).item()]),
    (tf.bfloat16.as_numpy_dtype, "half_val", [0x3FC0, 0xC080]),
    (np.complex64, "scomplex_val", [1.0, 2.0, -3.0, 0.5]),
    (np.complex128, "dcomplex_val", [1.0, 2.0, -3.0, 0.5, 9.0]),
])
@pytest.mark.parametrize("shape", [(), (1,), (2, 3), (4,), (0, 2)], ids=str)
def test_decoding_typed_fields_and_splats(dtype, field, stored, shape):
    count = int(np.prod(shape))
    stored = stored[:max(count, 1)]
    for values in (stored, stored[:1], []):  # all, a splat of one, none (zeros)
        proto = _typed(dtype, shape, field, values)
        try:
            expected = tensor_util.MakeNdarray(proto)
        except ValueError:  # more values than a tensor of no elements holds
            with pytest.raises(ValueError):
                make_ndarray(proto)
            continue
        got = make_ndarray(proto)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


def test_more_values_than_the_shape_holds_is_a_value_error():
    proto = _typed(np.float32, (2,), "float_val", [1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        make_ndarray(proto)


def test_quantized_dtypes_are_left_to_tensorflow():
    proto = tensor_util.make_tensor_proto(np.array([1, 2], np.int8), dtype=tf.qint8)
    with pytest.raises(UnsupportedDtype):
        make_ndarray(proto)
    from scopefusion.core.graph.constants import tensor_value

    np.testing.assert_array_equal(tensor_value(proto), tensor_util.MakeNdarray(proto))

/* The attribute signature of each node of a serialized GraphDef, read from the nodes' bytes.
 *
 * signatures(data, offsets, lengths, key) reads the NodeDef payload of every node (offsets and
 * lengths: bytes holding one native int64 per node, as _scan.scan gives them) and returns
 *
 *     (signatures, contents)
 *
 * signatures: per node a bytes object (nodes with equal signatures share one object) holding the
 *     node's op type and attribute map entries as they stand on the wire, every field in its order,
 *     except that the tensor of an attribute value keeps only its dtype, shape, resource handles
 *     and variants (fields 1, 2, 14, 15): a constant's contents are left out.  Each kept field is
 *     written as its tag's bytes, a four-byte length and its value (a message whose fields are
 *     trimmed: those fields written the same way), so the bytes read back one way only: equal
 *     signatures mean the same kept fields in the same order, which protobuf reads into the same
 *     op type and attributes (contents of tensors aside).
 * contents: per node, how many bytes of raw contents (``tensor_content``) the tensor of its
 *     attribute ``key`` holds, where that is plain to tell: exactly one map entry of that key,
 *     holding one value that is one tensor field, holding at most one ``tensor_content`` field;
 *     -1 otherwise (protobuf is asked).
 *
 * It returns None where it cannot tell what protobuf would read: bytes that do not parse, and a map
 * entry holding other fields than its key and value (see _scan.c).  The caller has protobuf parse
 * the bytes first; every read is bounds-checked all the same.
 */
#include "common.h"
#include "wire.h"

#define SIG_OK 0
#define SIG_CANNOT_TELL 1 /* return None */
#define SIG_ERROR 2       /* a Python exception is set */

/* NodeDef, AttrValue map entry, AttrValue and TensorProto field numbers read here. */
#define NODE_OP 2
#define NODE_ATTR 5
#define ENTRY_KEY 1
#define ENTRY_VALUE 2
#define VALUE_TENSOR 8
#define TENSOR_CONTENT 4

typedef struct {
    unsigned char *bytes;
    Py_ssize_t len, cap;
} buffer;

static int put(buffer *out, const void *bytes, Py_ssize_t n) {
    if (out->len + n > out->cap) {
        Py_ssize_t cap = out->cap ? out->cap : 256;
        while (cap < out->len + n) {
            cap *= 2;
        }
        unsigned char *grown = PyMem_Realloc(out->bytes, (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        out->bytes = grown;
        out->cap = cap;
    }
    memcpy(out->bytes + out->len, bytes, (size_t)n);
    out->len += n;
    return 0;
}

/* A field holding a trimmed message opened as a token: the tag's bytes [tag, value) and room for the
 * length, whose place goes to *at; close_field writes the length once the trimmed fields are in. */
static int open_field(buffer *out, const unsigned char *buf, Py_ssize_t tag, Py_ssize_t value, Py_ssize_t *at) {
    uint32_t placeholder = 0;
    if (put(out, buf + tag, value - tag) < 0) {
        return -1;
    }
    *at = out->len;
    return put(out, &placeholder, sizeof placeholder);
}

static void close_field(buffer *out, Py_ssize_t at) {
    uint32_t length = (uint32_t)(out->len - at - (Py_ssize_t)sizeof length);
    memcpy(out->bytes + at, &length, sizeof length);
}

/* One field as a token: the tag's bytes [tag, value), a length, then the value's bytes [value, end). */
static int put_field(buffer *out, const unsigned char *buf, Py_ssize_t tag, Py_ssize_t value, Py_ssize_t end) {
    uint32_t length = (uint32_t)(end - value);
    if (put(out, buf + tag, value - tag) < 0 || put(out, &length, sizeof length) < 0) {
        return -1;
    }
    return put(out, buf + value, end - value);
}

/* What the trimming of one message does with its fields: keep them (KEEP), leave them out (DROP),
 * or write a trimmed form of the message they hold (TRIM). */
enum { DROP, KEEP, TRIM };

/* The tensor's fields that a signature keeps. */
static int tensor_field(uint32_t field, int wire) {
    (void)wire;
    return field == 1 || field == 2 || field == 14 || field == 15 ? KEEP : DROP;
}

/* What a tensor tells of its raw contents: how many tensor_content fields it has (-1: one of another
 * wire type) and the last one's length. */
typedef struct {
    int count;
    Py_ssize_t size;
} contents_seen;

static int read_contents(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, contents_seen *seen) {
    while (pos < end) {
        uint32_t field;
        int wire;
        Py_ssize_t start, size;
        if (read_tag(buf, &pos, end, &field, &wire) < 0) {
            return -1;
        }
        if (field == TENSOR_CONTENT) {
            if (wire != 2 || read_length(buf, &pos, end, &start, &size) < 0) {
                seen->count = -1;
                return 0;
            }
            if (seen->count >= 0) {
                seen->count++;
            }
            seen->size = size;
        } else if (skip_value(buf, &pos, end, field, wire, 0) < 0) {
            return -1;
        }
    }
    return 0;
}

/* The message in [pos, end) with each field as ``rule`` says (a field to TRIM: with ``inner``). */
static int put_trimmed(buffer *out, const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end,
                       int (*rule)(uint32_t, int), int (*inner)(uint32_t, int)) {
    while (pos < end) {
        Py_ssize_t tag = pos, start, size;
        uint32_t field;
        int wire;
        if (read_tag(buf, &pos, end, &field, &wire) < 0) {
            return SIG_CANNOT_TELL;
        }
        Py_ssize_t value = pos;
        int what = rule(field, wire);
        if (what == TRIM) {
            if (read_length(buf, &pos, end, &start, &size) < 0) {
                return SIG_CANNOT_TELL;
            }
            Py_ssize_t at;
            if (open_field(out, buf, tag, value, &at) < 0) {
                return SIG_ERROR;
            }
            int status = put_trimmed(out, buf, start, start + size, inner, tensor_field);
            if (status != SIG_OK) {
                return status;
            }
            close_field(out, at);
            continue;
        }
        if (skip_value(buf, &pos, end, field, wire, 0) < 0) {
            return SIG_CANNOT_TELL;
        }
        if (what == KEEP && put_field(out, buf, tag, value, pos) < 0) {
            return SIG_ERROR;
        }
    }
    return SIG_OK;
}

/* An attribute value keeps every field; its tensor (field 8, a message) is trimmed. */
static int value_field(uint32_t field, int wire) {
    return field == VALUE_TENSOR && wire == 2 ? TRIM : KEEP;
}

typedef struct {
    const char *key;
    Py_ssize_t key_size;
    int entries;             /* map entries of that key */
    Py_ssize_t contents;     /* the raw contents' length of its tensor, -1: not plain */
} keyed_value;

/* What the value (an AttrValue) in [pos, end) tells of its tensor's raw contents: their length when
 * it is one tensor field holding at most one tensor_content, else -1. */
static Py_ssize_t contents_of(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end) {
    uint32_t field;
    int wire;
    Py_ssize_t start, size;
    if (read_tag(buf, &pos, end, &field, &wire) < 0 || field != VALUE_TENSOR || wire != 2 ||
        read_length(buf, &pos, end, &start, &size) < 0 || pos != end) {
        return -1;
    }
    contents_seen seen = {0, 0};
    if (read_contents(buf, start, start + size, &seen) < 0 || seen.count < 0 || seen.count > 1) {
        return -1;
    }
    return seen.count ? seen.size : 0;
}

/* One attribute map entry in [pos, end): its key and its trimmed value, each once at most; an entry
 * holding anything else is left to protobuf. */
static int put_entry(buffer *out, const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, keyed_value *keyed) {
    Py_ssize_t key_start = 0, key_size = 0, value_start = -1, value_size = 0;
    int values = 0;
    while (pos < end) {
        Py_ssize_t tag = pos, start, size;
        uint32_t field;
        int wire;
        if (read_tag(buf, &pos, end, &field, &wire) < 0 || field < ENTRY_KEY || field > ENTRY_VALUE || wire != 2) {
            return SIG_CANNOT_TELL;
        }
        Py_ssize_t value = pos;
        if (read_length(buf, &pos, end, &start, &size) < 0) {
            return SIG_CANNOT_TELL;
        }
        if (field == ENTRY_KEY) {
            key_start = start;
            key_size = size;
            if (put_field(out, buf, tag, value, pos) < 0) {
                return SIG_ERROR;
            }
            continue;
        }
        values++;
        value_start = start;
        value_size = size;
        Py_ssize_t at;
        if (open_field(out, buf, tag, value, &at) < 0) {
            return SIG_ERROR;
        }
        int status = put_trimmed(out, buf, start, start + size, value_field, tensor_field);
        if (status != SIG_OK) {
            return status;
        }
        close_field(out, at);
    }
    if (key_size == keyed->key_size && memcmp(buf + key_start, keyed->key, (size_t)key_size) == 0) {
        keyed->entries++;
        keyed->contents = values == 1 ? contents_of(buf, value_start, value_start + value_size) : -1;
    }
    return SIG_OK;
}

/* One node's signature into ``out`` (emptied first), and the raw contents' length of its keyed value. */
static int node_signature(buffer *out, const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end,
                          keyed_value *keyed) {
    out->len = 0;
    keyed->entries = 0;
    keyed->contents = -1;
    while (pos < end) {
        Py_ssize_t tag = pos, start, size;
        uint32_t field;
        int wire;
        if (read_tag(buf, &pos, end, &field, &wire) < 0) {
            return SIG_CANNOT_TELL;
        }
        Py_ssize_t value = pos;
        if (field == NODE_ATTR && wire == 2) {
            if (read_length(buf, &pos, end, &start, &size) < 0) {
                return SIG_CANNOT_TELL;
            }
            Py_ssize_t at;
            if (open_field(out, buf, tag, value, &at) < 0) {
                return SIG_ERROR;
            }
            int status = put_entry(out, buf, start, start + size, keyed);
            if (status != SIG_OK) {
                return status;
            }
            close_field(out, at);
            continue;
        }
        if (skip_value(buf, &pos, end, field, wire, 0) < 0) {
            return SIG_CANNOT_TELL;
        }
        if (field == NODE_OP && put_field(out, buf, tag, value, pos) < 0) {
            return SIG_ERROR;
        }
    }
    if (keyed->entries != 1) {
        keyed->contents = -1;
    }
    return SIG_OK;
}

/* A column of native int64s (``name``: for the error), as a pointer into its bytes and a count. */
static int int64s(PyObject *column, const char *name, const int64_t **items, Py_ssize_t *count) {
    if (!PyBytes_Check(column) || PyBytes_GET_SIZE(column) % (Py_ssize_t)sizeof(int64_t) != 0) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes of native int64s", name);
        return -1;
    }
    *items = (const int64_t *)PyBytes_AS_STRING(column);
    *count = PyBytes_GET_SIZE(column) / (Py_ssize_t)sizeof(int64_t);
    return 0;
}

/* Every node's signature and keyed contents; signatures equal in bytes are one object. */
static int read_nodes(const unsigned char *buf, Py_ssize_t size, const int64_t *offsets, const int64_t *lengths,
                      Py_ssize_t n, keyed_value *keyed, PyObject *signatures, PyObject *contents) {
    buffer out = {NULL, 0, 0};
    PyObject *seen = PyDict_New();
    int status = seen == NULL ? SIG_ERROR : SIG_OK;
    for (Py_ssize_t i = 0; i < n && status == SIG_OK; i++) {
        if (offsets[i] < 0 || lengths[i] < 0 || offsets[i] > size || lengths[i] > size - offsets[i]) {
            PyErr_SetString(PyExc_ValueError, "a node's byte range lies outside the data");
            status = SIG_ERROR;
            break;
        }
        status = node_signature(&out, buf, (Py_ssize_t)offsets[i], (Py_ssize_t)(offsets[i] + lengths[i]), keyed);
        if (status != SIG_OK) {
            break;
        }
        PyObject *made = PyBytes_FromStringAndSize((const char *)out.bytes, out.len);
        PyObject *shared = made == NULL ? NULL : PyDict_SetDefault(seen, made, made); /* borrowed */
        PyObject *length = shared == NULL ? NULL : PyLong_FromSsize_t(keyed->contents);
        if (length == NULL || PyList_SetItem(signatures, i, Py_NewRef(shared)) < 0 ||
            PyList_SetItem(contents, i, length) < 0) {
            status = SIG_ERROR;
        }
        Py_XDECREF(made);
    }
    PyMem_Free(out.bytes);
    Py_XDECREF(seen);
    return status;
}

static PyObject *signatures(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer view;
    PyObject *offset_column, *length_column;
    keyed_value keyed = {NULL, 0, 0, -1};
    if (!PyArg_ParseTuple(args, "y*SSy#:signatures", &view, &offset_column, &length_column, &keyed.key,
                          &keyed.key_size)) {
        return NULL;
    }
    const int64_t *offsets, *lengths;
    Py_ssize_t n, m;
    PyObject *result = NULL, *sigs = NULL, *contents = NULL;
    if (int64s(offset_column, "offsets", &offsets, &n) < 0 || int64s(length_column, "lengths", &lengths, &m) < 0) {
        goto done;
    }
    if (n != m) {
        PyErr_SetString(PyExc_ValueError, "offsets and lengths must describe as many nodes");
        goto done;
    }
    sigs = PyList_New(n);
    contents = PyList_New(n);
    if (sigs == NULL || contents == NULL) {
        goto done;
    }
    int status = read_nodes((const unsigned char *)view.buf, view.len, offsets, lengths, n, &keyed, sigs, contents);
    if (status == SIG_OK) {
        result = PyTuple_Pack(2, sigs, contents);
    } else if (status == SIG_CANNOT_TELL) {
        result = Py_NewRef(Py_None);
    }
done:
    Py_XDECREF(sigs);
    Py_XDECREF(contents);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"signatures", signatures, METH_VARARGS,
     "signatures(data, offsets, lengths, key) -> (signatures, contents) or None: each node's attribute "
     "signature and the raw contents' length of its attribute ``key`` (see the source's head)."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef module_def;

PyMODINIT_FUNC PyInit__signatures(void) {
    return new_module(&module_def, "_signatures", "Each node's attribute signature, read from a GraphDef's bytes.",
                      methods);
}

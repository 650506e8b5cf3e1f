/* One pass over a serialized GraphDef: the columns a graph index is made of.
 *
 * scan(data, max_port_digits) reads the protobuf wire format of a GraphDef (any object
 * with the buffer protocol) and returns
 *
 *     (offsets, lengths, names, ops, devices, counts, texts, inputs, index, dangling)
 *
 * offsets, lengths: bytes holding one native int64 per node: where the node's NodeDef
 *     payload starts in ``data`` and how many bytes it takes;
 * names, ops, devices: lists of str, one per node (ops interned: one object per op type);
 * counts: each node's number of inputs; texts: every node's input strings, end to end;
 * inputs: per node a tuple of (producer, port) pairs, read as edge_lists.parse_inputs reads
 *     them (control "^x" -> port -1, "x:k" with k a port of at most max_port_digits
 *     digits -> port k, an input naming no node -> producer -1 and a line in dangling);
 * index: name -> position (the last node of a repeated name); its values are the int
 *     objects the inputs hold;
 * keyed (only when ``key``, bytes, is given: scan(data, max_port_digits, key)): the positions of
 *     the nodes whose attribute map holds ``key``, in graph order (``key in node.attr``: an entry's
 *     key as protobuf reads it, the last key field of the entry, the empty key when it has none;
 *     an entry holding another field than its key and value is left to protobuf: None).
 *
 * It returns None where it cannot tell what protobuf would read: a malformed or truncated
 * buffer (a field cut short, a varint of more than ten bytes, a tag of more than 32 bits or of
 * field 0, an undefined wire type, an end-group tag out of place), a string that is not UTF-8,
 * groups nested more than MAX_GROUP_DEPTH deep.  Anything else follows protobuf: a scalar
 * string given twice keeps the last, repeated inputs append, every other field is skipped by
 * its wire type (attributes and unknown fields; a known field with another wire type than its
 * own is an unknown one to protobuf), whatever GraphDef fields sit between the nodes.  What is
 * skipped is not looked into: the caller has protobuf parse the bytes first.  Every read is
 * bounds-checked against the buffer.
 */
#include "common.h"
#include "wire.h"

typedef struct {
    Py_ssize_t start;
    Py_ssize_t size;
} span;

typedef struct {
    span *items;
    Py_ssize_t len;
    Py_ssize_t cap;
} spans;

/* The reasons a scan stops. */
#define SCAN_OK 0
#define SCAN_CANNOT_TELL 1 /* return None */
#define SCAN_ERROR 2       /* a Python exception is set */

static int push(spans *list, Py_ssize_t start, Py_ssize_t size) {
    span *grown = room_for_one(list->items, list->len, &list->cap, sizeof(span), 1024);
    if (grown == NULL) {
        return -1;
    }
    list->items = grown;
    list->items[list->len].start = start;
    list->items[list->len].size = size;
    list->len++;
    return 0;
}

/* ``size`` bytes at ``start`` as str; NULL with no exception set when they are not UTF-8. */
static PyObject *text_at(const unsigned char *buf, span s) {
    PyObject *text = PyUnicode_DecodeUTF8((const char *)buf + s.start, s.size, "strict");
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
    }
    return text;
}

/* A string field given again: the earlier value must have been UTF-8 too (protobuf checks every one). */
static int check_replaced(const unsigned char *buf, span old) {
    if (old.start < 0) {
        return SCAN_OK;
    }
    PyObject *text = text_at(buf, old);
    if (text == NULL) {
        return PyErr_Occurred() ? SCAN_ERROR : SCAN_CANNOT_TELL;
    }
    Py_DECREF(text);
    return SCAN_OK;
}

/* The strings that repeat from node to node (op types, devices), by their bytes: a string met
 * again is the same object, made once. */
#define CACHE_SLOTS 64
typedef struct {
    span where[CACHE_SLOTS];
    PyObject *text[CACHE_SLOTS];
} text_cache;

static PyObject *cached_text(const unsigned char *buf, span s, text_cache *cache, int intern) {
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (Py_ssize_t k = 0; k < s.size; k++) {
        hash = (hash ^ buf[s.start + k]) * 16777619u;
    }
    unsigned slot = hash % CACHE_SLOTS;
    PyObject *held = cache->text[slot];
    span where = cache->where[slot];
    if (held != NULL && where.size == s.size && memcmp(buf + where.start, buf + s.start, (size_t)s.size) == 0) {
        return Py_NewRef(held);
    }
    PyObject *text = text_at(buf, s);
    if (text == NULL) {
        return NULL;
    }
    if (intern) {
        PyUnicode_InternInPlace(&text); /* one object per op type, as sys.intern */
    }
    Py_XSETREF(cache->text[slot], Py_NewRef(text));
    cache->where[slot] = s;
    return text;
}

static void clear_cache(text_cache *cache) {
    for (int k = 0; k < CACHE_SLOTS; k++) {
        Py_CLEAR(cache->text[k]);
    }
}

typedef struct {
    const unsigned char *buf;
    const char *key;  /* the attribute key looked for (NULL: none) */
    Py_ssize_t key_size;
    PyObject *keyed;  /* the positions of the nodes whose attribute map holds it */
    PyObject *names, *ops, *devices, *counts;
    spans nodes;  /* each node's payload */
    spans inputs; /* every input string, end to end */
    spans name_spans; /* each node's name (size 0: none) */
    text_cache op_types, device_names;
} scan_state;

/* Whether the attribute map entry (a NodeDef field 5) in [pos, end) has the key looked for: its
 * key field (1) as protobuf reads it, the last one given (none: the empty key); 1 yes, 0 no,
 * -1 when the entry does not parse or holds a field other than its key and value, each
 * length-delimited (upb keeps such an entry out of the map, among the unknown fields; not every
 * protobuf runtime does: left to protobuf). */
static int entry_has_key(const scan_state *st, Py_ssize_t pos, Py_ssize_t end) {
    span key = {0, 0}, value;
    while (pos < end) {
        uint32_t field;
        int wire;
        if (read_tag(st->buf, &pos, end, &field, &wire) < 0 || field > 2 || wire != 2) {
            return -1;
        }
        if (read_length(st->buf, &pos, end, field == 1 ? &key.start : &value.start,
                        field == 1 ? &key.size : &value.size) < 0) {
            return -1;
        }
    }
    return key.size == st->key_size && memcmp(st->buf + key.start, st->key, (size_t)key.size) == 0;
}

/* Read one NodeDef's fields 1-4 and append its name, op, device and input count (and, when a key
 * is looked for, the node's position if an attribute map entry (field 5) has it). */
static int scan_node(scan_state *st, Py_ssize_t pos, Py_ssize_t end) {
    const unsigned char *buf = st->buf;
    span name = {-1, 0}, op = {-1, 0}, device = {-1, 0};
    Py_ssize_t first_input = st->inputs.len;
    int keyed = 0;
    while (pos < end) {
        uint32_t field;
        int wire;
        if (read_tag(buf, &pos, end, &field, &wire) < 0) {
            return SCAN_CANNOT_TELL;
        }
        if (field == 5 && wire == 2 && st->key != NULL) { /* an attribute map entry */
            span entry;
            if (read_length(buf, &pos, end, &entry.start, &entry.size) < 0) {
                return SCAN_CANNOT_TELL;
            }
            if (!keyed) {
                int found = entry_has_key(st, entry.start, entry.start + entry.size);
                if (found < 0) {
                    return SCAN_CANNOT_TELL;
                }
                keyed = found;
            }
        } else if (field >= 1 && field <= 4 && wire == 2) { /* another wire type: an unknown field to protobuf */
            span value;
            if (read_length(buf, &pos, end, &value.start, &value.size) < 0) {
                return SCAN_CANNOT_TELL;
            }
            span *slot = field == 1 ? &name : field == 2 ? &op : field == 4 ? &device : NULL;
            if (slot == NULL) {
                if (push(&st->inputs, value.start, value.size) < 0) {
                    return SCAN_ERROR;
                }
                continue;
            }
            int status = check_replaced(buf, *slot);
            if (status != SCAN_OK) {
                return status;
            }
            *slot = value;
        } else if (skip_value(buf, &pos, end, field, wire, 0) < 0) {
            return SCAN_CANNOT_TELL;
        }
    }
    if (push(&st->name_spans, name.start < 0 ? 0 : name.start, name.start < 0 ? 0 : name.size) < 0) {
        return SCAN_ERROR;
    }
    span fields[3] = {name, op, device};
    PyObject *lists[3] = {st->names, st->ops, st->devices};
    for (int k = 0; k < 3; k++) {
        PyObject *text;
        if (fields[k].start < 0) {
            text = PyUnicode_New(0, 0);
        } else if (k == 0) {
            text = text_at(buf, fields[k]);
        } else {
            text = cached_text(buf, fields[k], k == 1 ? &st->op_types : &st->device_names, k == 1);
        }
        if (text == NULL) {
            return PyErr_Occurred() ? SCAN_ERROR : SCAN_CANNOT_TELL;
        }
        int failed = PyList_Append(lists[k], text);
        Py_DECREF(text);
        if (failed < 0) {
            return SCAN_ERROR;
        }
    }
    if (keyed && append_int(st->keyed, PyList_GET_SIZE(st->counts)) < 0) {
        return SCAN_ERROR;
    }
    return append_int(st->counts, st->inputs.len - first_input) < 0 ? SCAN_ERROR : SCAN_OK;
}

/* The GraphDef's top level: every node field (1) read, every other field stepped over. */
static int scan_graph(scan_state *st, Py_ssize_t size) {
    Py_ssize_t pos = 0;
    while (pos < size) {
        uint32_t field;
        int wire;
        if (read_tag(st->buf, &pos, size, &field, &wire) < 0) {
            return SCAN_CANNOT_TELL;
        }
        if (field != 1 || wire != 2) { /* node with another wire type: an unknown field to protobuf */
            if (skip_value(st->buf, &pos, size, field, wire, 0) < 0) {
                return SCAN_CANNOT_TELL;
            }
            continue;
        }
        span node;
        if (read_length(st->buf, &pos, size, &node.start, &node.size) < 0) {
            return SCAN_CANNOT_TELL;
        }
        if (push(&st->nodes, node.start, node.size) < 0) {
            return SCAN_ERROR;
        }
        int status = scan_node(st, node.start, node.start + node.size);
        if (status != SCAN_OK) {
            return status;
        }
    }
    return SCAN_OK;
}

/* ``text`` (the input string at ``s``) read as a reference: the name it refers to and its port,
 * as edge_lists.parse_node_inputs reads an input that is no node's name. */
static PyObject *referred_name(const unsigned char *buf, span s, PyObject *text, int max_digits, long *port) {
    const unsigned char *p = buf + s.start;
    if (s.size > 0 && p[0] == '^') {
        *port = -1;
        return PyUnicode_Substring(text, 1, PyUnicode_GET_LENGTH(text));
    }
    Py_ssize_t colon = s.size - 1; /* rfind(":"): ':' is one byte in UTF-8, never inside another */
    while (colon >= 0 && p[colon] != ':') {
        colon--;
    }
    Py_ssize_t digits = s.size - colon - 1;
    int is_port = colon > 0 && digits >= 1 && digits <= max_digits;
    long value = 0;
    for (Py_ssize_t k = colon + 1; is_port && k < s.size; k++) {
        if (p[k] < '0' || p[k] > '9') {
            is_port = 0;
        } else {
            value = value * 10 + (p[k] - '0');
        }
    }
    if (!is_port) {
        *port = 0;
        Py_INCREF(text);
        return text;
    }
    *port = value;
    /* the digits are ASCII: the name is the text's first len - digits - 1 characters */
    Py_ssize_t chars = PyUnicode_GET_LENGTH(text);
    return PyUnicode_Substring(text, 0, chars - digits - 1);
}

/* How many nodes before a reader its inputs are first looked for among, by their names' bytes. */
#define NEARBY 16

/* The nodes an input may be found among without a lookup in the name table: the NEARBY nodes
 * before its reader (graphs list most producers shortly before their readers).  Only where every
 * name is unique, so that the node found is the one the name table holds. */
typedef struct {
    const spans *names; /* each node's name */
    PyObject *const *ids;  /* each node's position as the name table's int object (borrowed) */
    Py_ssize_t reader;  /* the reader's position */
} nearby_nodes;

/* The producer (borrowed) whose name is the input at ``s``, among the nodes nearby; NULL if none is. */
static PyObject *nearby_producer(const unsigned char *buf, span s, const nearby_nodes *near) {
    if (near->ids == NULL) {
        return NULL;
    }
    const span *names = near->names->items;
    Py_ssize_t last = near->reader - NEARBY < 0 ? 0 : near->reader - NEARBY;
    for (Py_ssize_t j = near->reader - 1; j >= last; j--) {
        if (names[j].size == s.size && memcmp(buf + names[j].start, buf + s.start, (size_t)s.size) == 0) {
            return near->ids[j];
        }
    }
    return NULL;
}

/* One node's inputs as a tuple of (producer, port) pairs. */
static PyObject *node_inputs(const unsigned char *buf, span *items, Py_ssize_t n, PyObject *reader,
                             PyObject *index, PyObject *texts, PyObject *dangling, int max_digits, int *bad,
                             const nearby_nodes *near) {
    PyObject *result = PyTuple_New(n);
    if (result == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *text = text_at(buf, items[k]);
        if (text == NULL) {
            *bad = PyErr_Occurred() == NULL;
            goto fail;
        }
        int failed = PyList_Append(texts, text);
        if (failed < 0) {
            Py_DECREF(text);
            goto fail;
        }
        PyObject *producer = nearby_producer(buf, items[k], near); /* borrowed */
        if (producer == NULL) {
            producer = PyDict_GetItemWithError(index, text);
        }
        PyObject *port;
        if (producer != NULL) {
            Py_INCREF(producer);
            port = PyLong_FromLong(0);
        } else if (PyErr_Occurred()) {
            Py_DECREF(text);
            goto fail;
        } else {
            long number;
            PyObject *name = referred_name(buf, items[k], text, max_digits, &number);
            if (name == NULL) {
                Py_DECREF(text);
                goto fail;
            }
            producer = PyDict_GetItemWithError(index, name);
            Py_DECREF(name);
            if (producer != NULL) {
                Py_INCREF(producer);
            } else if (PyErr_Occurred()) {
                Py_DECREF(text);
                goto fail;
            } else {
                PyObject *line = PyUnicode_FromFormat("%R reads %R", reader, text);
                if (line == NULL || PyList_Append(dangling, line) < 0) {
                    Py_XDECREF(line);
                    Py_DECREF(text);
                    goto fail;
                }
                Py_DECREF(line);
                producer = PyLong_FromLong(-1);
            }
            port = PyLong_FromLong(number);
        }
        Py_DECREF(text);
        if (producer == NULL || port == NULL) {
            Py_XDECREF(producer);
            Py_XDECREF(port);
            goto fail;
        }
        PyObject *pair = untracked_if_atomic(PyTuple_Pack(2, producer, port));
        Py_DECREF(producer);
        Py_DECREF(port);
        if (pair == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(result, k, pair);
    }
    return untracked_if_atomic(result);
fail:
    Py_DECREF(result);
    return NULL;
}

/* The name table, then every node's inputs read against it. */
static int resolve(scan_state *st, PyObject *index, PyObject *texts, PyObject *inputs, PyObject *dangling,
                   int max_digits) {
    Py_ssize_t n = PyList_GET_SIZE(st->names);
    PyObject **ids = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(PyObject *));
    if (ids == NULL) {
        PyErr_NoMemory();
        return SCAN_ERROR;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyLong_FromSsize_t(i);
        if (id == NULL) {
            PyMem_Free(ids);
            return SCAN_ERROR;
        }
        int failed = PyDict_SetItem(index, PyList_GET_ITEM(st->names, i), id);
        ids[i] = id; /* the name table holds it from here on (or the failure ends the scan) */
        Py_DECREF(id);
        if (failed < 0) {
            PyMem_Free(ids);
            return SCAN_ERROR;
        }
    }
    /* a repeated name stands for its last node in the name table: nearby nodes only without any */
    nearby_nodes near = {&st->name_spans, PyDict_GET_SIZE(index) == n ? ids : NULL, 0};
    Py_ssize_t next = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t count = PyLong_AsSsize_t(PyList_GET_ITEM(st->counts, i));
        int bad = 0;
        near.reader = i;
        PyObject *ins = node_inputs(st->buf, st->inputs.items + next, count, PyList_GET_ITEM(st->names, i), index,
                                    texts, dangling, max_digits, &bad, &near);
        if (ins == NULL) {
            PyMem_Free(ids);
            return bad ? SCAN_CANNOT_TELL : SCAN_ERROR;
        }
        next += count;
        int failed = PyList_Append(inputs, ins);
        Py_DECREF(ins);
        if (failed < 0) {
            PyMem_Free(ids);
            return SCAN_ERROR;
        }
    }
    PyMem_Free(ids);
    return SCAN_OK;
}

static PyObject *int64_column(spans *list, int sizes) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, list->len * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) {
        return NULL;
    }
    int64_t *column = (int64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < list->len; i++) {
        column[i] = sizes ? (int64_t)list->items[i].size : (int64_t)list->items[i].start;
    }
    return out;
}

static PyObject *scan(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer view;
    int max_digits;
    const char *key = NULL;
    Py_ssize_t key_size = 0;
    if (!PyArg_ParseTuple(args, "y*i|z#:scan", &view, &max_digits, &key, &key_size)) {
        return NULL;
    }
    scan_state st;
    memset(&st, 0, sizeof st);
    st.buf = (const unsigned char *)view.buf;
    st.key = key;
    st.key_size = key_size;
    st.keyed = PyList_New(0);
    st.names = PyList_New(0);
    st.ops = PyList_New(0);
    st.devices = PyList_New(0);
    st.counts = PyList_New(0);
    PyObject *index = PyDict_New(), *texts = PyList_New(0), *inputs = PyList_New(0), *dangling = PyList_New(0);
    PyObject *result = NULL;
    int status = SCAN_ERROR;
    if (st.keyed && st.names && st.ops && st.devices && st.counts && index && texts && inputs && dangling) {
        status = scan_graph(&st, view.len);
        if (status == SCAN_OK) {
            status = resolve(&st, index, texts, inputs, dangling, max_digits);
        }
    }
    if (status == SCAN_OK) {
        PyObject *offsets = int64_column(&st.nodes, 0), *lengths = int64_column(&st.nodes, 1);
        if (offsets && lengths && key == NULL) {
            result = PyTuple_Pack(10, offsets, lengths, st.names, st.ops, st.devices, st.counts, texts, inputs,
                                  index, dangling);
        } else if (offsets && lengths) {
            result = PyTuple_Pack(11, offsets, lengths, st.names, st.ops, st.devices, st.counts, texts, inputs,
                                  index, dangling, st.keyed);
        }
        Py_XDECREF(offsets);
        Py_XDECREF(lengths);
    } else if (status == SCAN_CANNOT_TELL) {
        result = Py_NewRef(Py_None);
    }
    clear_cache(&st.op_types);
    clear_cache(&st.device_names);
    PyMem_Free(st.nodes.items);
    PyMem_Free(st.inputs.items);
    PyMem_Free(st.name_spans.items);
    Py_XDECREF(st.keyed);
    Py_XDECREF(st.names);
    Py_XDECREF(st.ops);
    Py_XDECREF(st.devices);
    Py_XDECREF(st.counts);
    Py_XDECREF(index);
    Py_XDECREF(texts);
    Py_XDECREF(inputs);
    Py_XDECREF(dangling);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data, max_port_digits[, key]) -> (offsets, lengths, names, ops, devices, counts, texts, inputs, "
     "index, dangling[, keyed]) or None: the columns of the serialized GraphDef ``data`` (see the source's "
     "head)."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef module_def;

PyMODINIT_FUNC PyInit__scan(void) {
    return new_module(&module_def, "_scan", "One pass over a serialized GraphDef: a graph index's columns.", methods);
}

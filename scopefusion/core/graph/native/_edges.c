/* The per-node edge work of a graph index, in C: reading NodeDef inputs into (producer, port)
 * pairs, renumbering them, the consumers of every producer, Kahn's order over them, the op
 * table, the unread nodes, loop back edges, and a rewrite's per-node lists in the new order.
 *
 * Each function returns exactly what its pure-Python equivalent (edge_lists.py, toposort.py,
 * layout.py, index.py) returns: the same values in the same containers (tuples and lists), the
 * caller's own int objects for node indices, one shared empty tuple for every node without edges,
 * and the same errors.  Indices read from the caller's data are checked as Python indexing checks
 * them (a negative index counts from the end; out of range raises IndexError): odd input raises,
 * it never reads past an array.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *EMPTY;      /* () */
static PyObject *ZERO;       /* 0, port of a plain input */
static PyObject *CONTROL;    /* -1, port of a control edge, and the producer of a dangling input */
static PyObject *INPUT_ATTR; /* "input" */

#define MAX_PORT_DIGITS 9

/* ------------------------------------------------------------------------------ helpers */

/* `obj` as an index into a sequence of `n` items, as Python's list indexing reads it. */
static int
index_into(PyObject *obj, Py_ssize_t n, Py_ssize_t *out)
{
    Py_ssize_t i = PyNumber_AsSsize_t(obj, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred())
        return -1;
    if (i < 0)
        i += n;
    if (i < 0 || i >= n) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        return -1;
    }
    *out = i;
    return 0;
}

/* The `size` items of `item` (a tuple or list, borrowed from it), as `a, b = item` unpacks. */
static int
unpack(PyObject *item, Py_ssize_t size, PyObject **out)
{
    PyObject **items;
    Py_ssize_t got;
    if (PyTuple_Check(item)) {
        items = &PyTuple_GET_ITEM(item, 0);
        got = PyTuple_GET_SIZE(item);
    }
    else if (PyList_Check(item)) {
        items = PySequence_Fast_ITEMS(item);
        got = PyList_GET_SIZE(item);
    }
    else {
        PyErr_Format(PyExc_TypeError, "an edge must be a tuple, not %.100s", Py_TYPE(item)->tp_name);
        return -1;
    }
    if (got != size) {
        if (got > size)
            PyErr_Format(PyExc_ValueError, "too many values to unpack (expected %zd)", size);
        else
            PyErr_Format(PyExc_ValueError, "not enough values to unpack (expected %zd, got %zd)", size, got);
        return -1;
    }
    for (Py_ssize_t k = 0; k < size; k++)
        out[k] = items[k];
    return 0;
}

/* zip(a, b, strict=True)'s complaint about sequences of other lengths. */
static int
check_lengths(Py_ssize_t first, Py_ssize_t second)
{
    if (first == second)
        return 0;
    PyErr_Format(PyExc_ValueError, "zip() argument 2 is %s than argument 1", second < first ? "shorter" : "longer");
    return -1;
}

static PyObject *
pair(PyObject *a, PyObject *b)
{
    PyObject *t = PyTuple_New(2);
    if (t == NULL)
        return NULL;
    Py_INCREF(a);
    PyTuple_SET_ITEM(t, 0, a);
    Py_INCREF(b);
    PyTuple_SET_ITEM(t, 1, b);
    return t;
}

/* A growable array of owned references. */
typedef struct {
    PyObject **items;
    Py_ssize_t size, capacity;
} Stack;

static int
stack_push(Stack *s, PyObject *obj)  /* steals obj, also on failure */
{
    if (s->size == s->capacity) {
        Py_ssize_t capacity = s->capacity ? 2 * s->capacity : 16;
        PyObject **items = PyMem_Realloc(s->items, (size_t)capacity * sizeof(PyObject *));
        if (items == NULL) {
            Py_DECREF(obj);
            PyErr_NoMemory();
            return -1;
        }
        s->items = items;
        s->capacity = capacity;
    }
    s->items[s->size++] = obj;
    return 0;
}

static void
stack_clear(Stack *s)
{
    for (Py_ssize_t k = 0; k < s->size; k++)
        Py_DECREF(s->items[k]);
    s->size = 0;
}

static void
stack_free(Stack *s)
{
    stack_clear(s);
    PyMem_Free(s->items);
    s->items = NULL;
    s->capacity = 0;
}

/* The stack's items as a tuple (the shared empty tuple when there are none); the stack is emptied. */
static PyObject *
stack_tuple(Stack *s)
{
    if (s->size == 0) {
        Py_INCREF(EMPTY);
        return EMPTY;
    }
    PyObject *t = PyTuple_New(s->size);
    if (t == NULL)
        return NULL;
    memcpy(&PyTuple_GET_ITEM(t, 0), s->items, (size_t)s->size * sizeof(PyObject *));
    s->size = 0;  /* the references moved into the tuple */
    return t;
}

/* ------------------------------------------------------------------------ parse_inputs */

/* The (producer, port) pair of an input string that is not a plain node name, as
 * edge_lists.parse_node_inputs reads it; a name naming no node is told in `dangling`. */
static PyObject *
parse_text(PyObject *text, PyObject *index, PyObject *reader, PyObject *dangling)
{
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    PyObject *name = NULL, *port = NULL, *producer, *result = NULL;
    if (length > 0 && PyUnicode_READ_CHAR(text, 0) == '^') {
        name = PyUnicode_Substring(text, 1, length);
        port = CONTROL;
        Py_INCREF(port);
    }
    else {
        Py_ssize_t colon = PyUnicode_FindChar(text, ':', 0, length, -1);
        if (colon == -2)
            return NULL;
        Py_ssize_t digits = length - colon - 1;
        int is_port = colon > 0 && digits >= 1 && digits <= MAX_PORT_DIGITS;
        long value = 0;
        for (Py_ssize_t k = colon + 1; is_port && k < length; k++) {
            Py_UCS4 ch = PyUnicode_READ_CHAR(text, k);
            if (ch < '0' || ch > '9')
                is_port = 0;
            else
                value = value * 10 + (long)(ch - '0');
        }
        if (is_port) {
            name = PyUnicode_Substring(text, 0, colon);
            port = PyLong_FromLong(value);
        }
        else {
            name = text;
            Py_INCREF(name);
            port = ZERO;
            Py_INCREF(port);
        }
    }
    if (name == NULL || port == NULL)
        goto done;
    producer = PyDict_GetItemWithError(index, name);
    if (producer == NULL) {
        if (PyErr_Occurred())
            goto done;
        PyObject *told = PyUnicode_FromFormat("%R reads %R", reader, text);
        if (told == NULL)
            goto done;
        int failed = PyList_Append(dangling, told);
        Py_DECREF(told);
        if (failed)
            goto done;
        producer = CONTROL;
    }
    result = pair(producer, port);
done:
    Py_XDECREF(name);
    Py_XDECREF(port);
    return result;
}

/* One node's inputs as a tuple of (producer, port) pairs. */
static PyObject *
node_inputs(PyObject *node, PyObject *reader, PyObject *index, PyObject *dangling, Stack *parsed)
{
    PyObject *texts = PyObject_GetAttr(node, INPUT_ATTR);
    if (texts == NULL)
        return NULL;
    /* all strings at once: protobuf's repeated field hands a slice out faster than it iterates */
    PyObject *listed = PyList_CheckExact(texts) || PyTuple_CheckExact(texts)
                       ? (Py_INCREF(texts), texts) : PySequence_GetSlice(texts, 0, PY_SSIZE_T_MAX);
    Py_DECREF(texts);
    if (listed == NULL)
        return NULL;
    PyObject *it = PyObject_GetIter(listed);
    Py_DECREF(listed);
    if (it == NULL)
        return NULL;
    PyObject *text;
    while ((text = PyIter_Next(it)) != NULL) {
        PyObject *edge;
        if (!PyUnicode_Check(text)) {
            PyErr_Format(PyExc_TypeError, "an input of %R is a %.100s, not a str", reader, Py_TYPE(text)->tp_name);
            edge = NULL;
        }
        else {
            PyObject *producer = PyDict_GetItemWithError(index, text);  /* names hold no ':' and no '^' */
            if (producer != NULL)
                edge = pair(producer, ZERO);
            else if (PyErr_Occurred())
                edge = NULL;
            else
                edge = parse_text(text, index, reader, dangling);
        }
        Py_DECREF(text);
        if (edge == NULL || stack_push(parsed, edge) < 0) {
            Py_DECREF(it);
            stack_clear(parsed);
            return NULL;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) {
        stack_clear(parsed);
        return NULL;
    }
    return stack_tuple(parsed);
}

static PyObject *
parse_inputs(PyObject *module, PyObject *args)
{
    PyObject *nodes, *names, *index, *dangling;
    if (!PyArg_ParseTuple(args, "OOO!O!:parse_inputs", &nodes, &names, &PyDict_Type, &index,
                          &PyList_Type, &dangling))
        return NULL;
    if (!PyDict_CheckExact(index)) {  /* a subclass may read its items otherwise */
        PyErr_SetString(PyExc_TypeError, "the name table must be a dict");
        return NULL;
    }
    PyObject *node_seq = PySequence_Fast(nodes, "nodes must be a sequence");
    if (node_seq == NULL)
        return NULL;
    PyObject *name_seq = PySequence_Fast(names, "names must be a sequence");
    if (name_seq == NULL) {
        Py_DECREF(node_seq);
        return NULL;
    }
    PyObject *result = NULL;
    Stack parsed = {NULL, 0, 0};
    Py_ssize_t n = PySequence_Fast_GET_SIZE(node_seq);
    if (check_lengths(n, PySequence_Fast_GET_SIZE(name_seq)) < 0)
        goto done;
    result = PyList_New(n);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ins = node_inputs(PySequence_Fast_GET_ITEM(node_seq, i), PySequence_Fast_GET_ITEM(name_seq, i),
                                    index, dangling, &parsed);
        if (ins == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, ins);
    }
done:
    stack_free(&parsed);
    Py_DECREF(node_seq);
    Py_DECREF(name_seq);
    return result;
}

/* --------------------------------------------------------------------------- renumbered */

static PyObject *
renumbered(PyObject *module, PyObject *args)
{
    PyObject *inputs, *new_index;
    if (!PyArg_ParseTuple(args, "OO:renumbered", &inputs, &new_index))
        return NULL;
    PyObject *in_seq = PySequence_Fast(inputs, "inputs must be a sequence");
    if (in_seq == NULL)
        return NULL;
    PyObject *map = PySequence_Fast(new_index, "new_index must be a sequence");
    if (map == NULL) {
        Py_DECREF(in_seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(in_seq);
    PyObject *result = PyList_New(n);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ins = PySequence_Fast(PySequence_Fast_GET_ITEM(in_seq, i), "a node's inputs must be a sequence");
        if (ins == NULL)
            goto fail;
        Py_ssize_t k = PySequence_Fast_GET_SIZE(ins);
        PyObject *out = k ? PyTuple_New(k) : (Py_INCREF(EMPTY), EMPTY);
        if (out == NULL) {
            Py_DECREF(ins);
            goto fail;
        }
        PyList_SET_ITEM(result, i, out);
        for (Py_ssize_t slot = 0; slot < k; slot++) {
            PyObject *edge[2], *renamed;
            Py_ssize_t p;
            /* the map is a list or tuple: read its length anew, in case __index__ code changed it */
            if (unpack(PySequence_Fast_GET_ITEM(ins, slot), 2, edge) < 0 ||
                index_into(edge[0], PySequence_Fast_GET_SIZE(map), &p) < 0 ||
                (renamed = pair(PySequence_Fast_GET_ITEM(map, p), edge[1])) == NULL) {
                /* fill the rest so that the tuple can be freed */
                for (; slot < k; slot++) {
                    Py_INCREF(Py_None);
                    PyTuple_SET_ITEM(out, slot, Py_None);
                }
                Py_DECREF(ins);
                goto fail;
            }
            PyTuple_SET_ITEM(out, slot, renamed);
        }
        Py_DECREF(ins);
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    Py_DECREF(in_seq);
    Py_DECREF(map);
    return result;
}

/* ------------------------------------------------------------------------- consumers_of */

static PyObject *
consumers_of(PyObject *module, PyObject *args)
{
    PyObject *inputs, *ids;
    if (!PyArg_ParseTuple(args, "OO:consumers_of", &inputs, &ids))
        return NULL;
    PyObject *in_seq = PySequence_Fast(inputs, "inputs must be a sequence");
    if (in_seq == NULL)
        return NULL;
    PyObject *id_seq = PySequence_Fast(ids, "ids must be a sequence");
    if (id_seq == NULL) {
        Py_DECREF(in_seq);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t *count = NULL, *filled = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(id_seq), nin = PySequence_Fast_GET_SIZE(in_seq);
    if (check_lengths(n, nin) < 0)
        goto done;
    count = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));
    filled = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));
    if (count == NULL || filled == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* first pass: how many reads of each producer (every index checked here) */
    for (Py_ssize_t c = 0; c < n; c++) {
        PyObject *ins = PySequence_Fast(PySequence_Fast_GET_ITEM(in_seq, c), "a node's inputs must be a sequence");
        if (ins == NULL)
            goto done;
        for (Py_ssize_t slot = 0; slot < PySequence_Fast_GET_SIZE(ins); slot++) {
            PyObject *edge[2];
            Py_ssize_t p;
            if (unpack(PySequence_Fast_GET_ITEM(ins, slot), 2, edge) < 0 || index_into(edge[0], n, &p) < 0) {
                Py_DECREF(ins);
                goto done;
            }
            count[p]++;
        }
        Py_DECREF(ins);
    }
    result = PyList_New(n);
    if (result == NULL)
        goto done;
    for (Py_ssize_t p = 0; p < n; p++) {
        PyObject *readers = count[p] ? PyTuple_New(count[p]) : (Py_INCREF(EMPTY), EMPTY);
        if (readers == NULL)
            goto fail;
        if (count[p])
            for (Py_ssize_t k = 0; k < count[p]; k++) {  /* placeholders until filled */
                Py_INCREF(Py_None);
                PyTuple_SET_ITEM(readers, k, Py_None);
            }
        PyList_SET_ITEM(result, p, readers);
    }
    /* second pass: the (consumer, port, slot) triples, by consumer then slot */
    for (Py_ssize_t c = 0; c < n; c++) {
        PyObject *ins = PySequence_Fast(PySequence_Fast_GET_ITEM(in_seq, c), "a node's inputs must be a sequence");
        if (ins == NULL)
            goto fail;
        PyObject *consumer = PySequence_Fast_GET_ITEM(id_seq, c);
        for (Py_ssize_t slot = 0; slot < PySequence_Fast_GET_SIZE(ins); slot++) {
            PyObject *edge[2], *triple, *slot_int;
            Py_ssize_t p;
            if (unpack(PySequence_Fast_GET_ITEM(ins, slot), 2, edge) < 0 || index_into(edge[0], n, &p) < 0) {
                Py_DECREF(ins);
                goto fail;
            }
            if (filled[p] >= count[p]) {
                Py_DECREF(ins);
                PyErr_SetString(PyExc_RuntimeError, "the inputs changed while their consumers were listed");
                goto fail;
            }
            slot_int = PyLong_FromSsize_t(slot);
            triple = slot_int ? PyTuple_New(3) : NULL;
            if (triple == NULL) {
                Py_XDECREF(slot_int);
                Py_DECREF(ins);
                goto fail;
            }
            Py_INCREF(consumer);
            PyTuple_SET_ITEM(triple, 0, consumer);
            Py_INCREF(edge[1]);
            PyTuple_SET_ITEM(triple, 1, edge[1]);
            PyTuple_SET_ITEM(triple, 2, slot_int);
            PyObject *readers = PyList_GET_ITEM(result, p);
            PyObject *old = PyTuple_GET_ITEM(readers, filled[p]);
            PyTuple_SET_ITEM(readers, filled[p], triple);
            Py_DECREF(old);
            filled[p]++;
        }
        Py_DECREF(ins);
    }
    for (Py_ssize_t p = 0; p < n; p++)
        if (filled[p] != count[p]) {
            PyErr_SetString(PyExc_RuntimeError, "the inputs changed while their consumers were listed");
            goto fail;
        }
    goto done;
fail:
    Py_CLEAR(result);
done:
    PyMem_Free(count);
    PyMem_Free(filled);
    Py_DECREF(in_seq);
    Py_DECREF(id_seq);
    return result;
}

/* ----------------------------------------------------------------- kahn_order_by_readers */

static PyObject *
kahn_order_by_readers(PyObject *module, PyObject *args)
{
    PyObject *indegree, *readers, *ids = Py_None;
    if (!PyArg_ParseTuple(args, "O!O|O:kahn_order_by_readers", &PyList_Type, &indegree, &readers, &ids))
        return NULL;
    PyObject *reader_seq = PySequence_Fast(readers, "readers must be a sequence");
    if (reader_seq == NULL)
        return NULL;
    PyObject *id_seq = NULL, *result = NULL;
    Py_ssize_t *degree = NULL, *start = NULL, *where = NULL;
    Stack order = {NULL, 0, 0};
    Py_ssize_t n = PyList_GET_SIZE(indegree), sources = n;
    if (ids != Py_None) {
        id_seq = PySequence_Fast(ids, "ids must be a sequence");
        if (id_seq == NULL)
            goto done;
        if (PySequence_Fast_GET_SIZE(id_seq) < sources)
            sources = PySequence_Fast_GET_SIZE(id_seq);  /* compress() stops at the shorter */
    }
    degree = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));
    start = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));
    where = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));  /* per order entry: its index value */
    if (degree == NULL || start == NULL || where == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyList_GET_ITEM(indegree, i);
        if (PyLong_CheckExact(d)) {
            int overflow;
            degree[i] = PyLong_AsLongLongAndOverflow(d, &overflow);
            if (overflow) {
                PyErr_SetString(PyExc_OverflowError, "an indegree is too large");
                goto done;
            }
        }
        else {
            PyErr_Format(PyExc_TypeError, "an indegree must be an int, not %.100s", Py_TYPE(d)->tp_name);
            goto done;
        }
        start[i] = degree[i];
    }
    for (Py_ssize_t i = 0; i < sources; i++) {
        if (degree[i] != 0)
            continue;
        /* the order lists the source as the object ids holds, and follows its readers by its value */
        Py_ssize_t value = i;
        PyObject *source;
        if (id_seq != NULL) {
            source = PySequence_Fast_GET_ITEM(id_seq, i);
            value = PyNumber_AsSsize_t(source, PyExc_IndexError);
            if (value == -1 && PyErr_Occurred())
                goto done;
            Py_INCREF(source);
        }
        else if ((source = PyLong_FromSsize_t(i)) == NULL)
            goto done;
        if (stack_push(&order, source) < 0)
            goto done;
        where[order.size - 1] = value;
    }
    /* the order is its own queue: each node enters it once, when its count reaches 0 */
    for (Py_ssize_t q = 0; q < order.size; q++) {
        Py_ssize_t i = where[q];
        if (i < 0)
            i += PySequence_Fast_GET_SIZE(reader_seq);
        if (i < 0 || i >= PySequence_Fast_GET_SIZE(reader_seq)) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            goto done;
        }
        PyObject *edges = PySequence_Fast(PySequence_Fast_GET_ITEM(reader_seq, i), "a node's readers must be a sequence");
        if (edges == NULL)
            goto done;
        for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(edges); k++) {
            PyObject *edge[3];
            Py_ssize_t raw, c;
            if (unpack(PySequence_Fast_GET_ITEM(edges, k), 3, edge) < 0) {
                Py_DECREF(edges);
                goto done;
            }
            raw = PyNumber_AsSsize_t(edge[0], PyExc_IndexError);
            if ((raw == -1 && PyErr_Occurred()) || index_into(edge[0], n, &c) < 0) {
                Py_DECREF(edges);
                goto done;
            }
            if (--degree[c] == 0) {
                if (order.size >= n) {  /* cannot happen: a node's count reaches 0 once */
                    Py_DECREF(edges);
                    PyErr_SetString(PyExc_RuntimeError, "a node entered the order twice");
                    goto done;
                }
                Py_INCREF(edge[0]);
                if (stack_push(&order, edge[0]) < 0) {
                    Py_DECREF(edges);
                    goto done;
                }
                where[order.size - 1] = raw;
            }
        }
        Py_DECREF(edges);
    }
    /* the counts left, as the pure-Python sort leaves them (on_cycles reads them) */
    if (PyList_GET_SIZE(indegree) != n) {
        PyErr_SetString(PyExc_RuntimeError, "the indegree list changed during the sort");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (degree[i] != start[i]) {
            PyObject *d = PyLong_FromSsize_t(degree[i]);
            if (d == NULL || PyList_SetItem(indegree, i, d) < 0)
                goto done;
        }
    result = PyList_New(order.size);
    if (result == NULL)
        goto done;
    for (Py_ssize_t q = 0; q < order.size; q++)
        PyList_SET_ITEM(result, q, order.items[q]);
    order.size = 0;  /* the references moved into the list */
done:
    stack_free(&order);
    PyMem_Free(degree);
    PyMem_Free(start);
    PyMem_Free(where);
    Py_XDECREF(id_seq);
    Py_DECREF(reader_seq);
    return result;
}

/* --------------------------------------------------------------------------- nodes_by_op */

static PyObject *
nodes_by_op(PyObject *module, PyObject *args)
{
    PyObject *ids, *ops;
    if (!PyArg_ParseTuple(args, "OO:nodes_by_op", &ids, &ops))
        return NULL;
    PyObject *id_seq = PySequence_Fast(ids, "ids must be a sequence");
    if (id_seq == NULL)
        return NULL;
    PyObject *op_seq = PySequence_Fast(ops, "ops must be a sequence");
    if (op_seq == NULL) {
        Py_DECREF(id_seq);
        return NULL;
    }
    PyObject *table = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(id_seq);
    if (check_lengths(n, PySequence_Fast_GET_SIZE(op_seq)) < 0)
        goto done;
    table = PyDict_New();
    if (table == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PySequence_Fast_GET_ITEM(op_seq, i), *node = PySequence_Fast_GET_ITEM(id_seq, i);
        PyObject *bucket = PyDict_GetItemWithError(table, op);
        if (bucket != NULL) {
            if (PyList_Append(bucket, node) < 0)
                goto fail;
            continue;
        }
        if (PyErr_Occurred())
            goto fail;
        bucket = PyList_New(1);
        if (bucket == NULL)
            goto fail;
        Py_INCREF(node);
        PyList_SET_ITEM(bucket, 0, node);
        int failed = PyDict_SetItem(table, op, bucket);
        Py_DECREF(bucket);
        if (failed)
            goto fail;
    }
    goto done;
fail:
    Py_CLEAR(table);
done:
    Py_DECREF(id_seq);
    Py_DECREF(op_seq);
    return table;
}

/* ---------------------------------------------------------------------------- unread */

static PyObject *
falsy_positions(PyObject *module, PyObject *lists)
{
    PyObject *seq = PySequence_Fast(lists, "a sequence of per-node edges is needed");
    if (seq == NULL)
        return NULL;
    PyObject *result = PyList_New(0);
    for (Py_ssize_t i = 0; result != NULL && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        int empty = PyTuple_CheckExact(item) ? PyTuple_GET_SIZE(item) == 0 : PyObject_Not(item);
        if (empty < 0) {
            Py_CLEAR(result);
            break;
        }
        if (!empty)
            continue;
        PyObject *k = PyLong_FromSsize_t(i);
        if (k == NULL || PyList_Append(result, k) < 0)
            Py_CLEAR(result);
        Py_XDECREF(k);
    }
    Py_DECREF(seq);
    return result;
}

static PyObject *
unread_nodes(PyObject *module, PyObject *args)
{
    PyObject *inputs;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "On:unread_nodes", &inputs, &n))
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "negative node count");
        return NULL;
    }
    PyObject *in_seq = PySequence_Fast(inputs, "inputs must be a sequence");
    if (in_seq == NULL)
        return NULL;
    PyObject *result = NULL;
    char *used = PyMem_Calloc((size_t)n + 1, 1);
    if (used == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t c = 0; c < PySequence_Fast_GET_SIZE(in_seq); c++) {
        PyObject *ins = PySequence_Fast(PySequence_Fast_GET_ITEM(in_seq, c), "a node's inputs must be a sequence");
        if (ins == NULL)
            goto done;
        for (Py_ssize_t slot = 0; slot < PySequence_Fast_GET_SIZE(ins); slot++) {
            PyObject *edge[2];
            Py_ssize_t p = -1;
            if (unpack(PySequence_Fast_GET_ITEM(ins, slot), 2, edge) < 0 ||
                ((p = PyNumber_AsSsize_t(edge[0], PyExc_IndexError)) == -1 && PyErr_Occurred())) {
                Py_DECREF(ins);
                goto done;
            }
            if (p < 0)
                p += n;
            if (p < 0 || p >= n) {
                PyErr_SetString(PyExc_IndexError, "bytearray index out of range");
                Py_DECREF(ins);
                goto done;
            }
            used[p] = 1;
        }
        Py_DECREF(ins);
    }
    result = PyList_New(0);
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        if (used[i])
            continue;
        PyObject *k = PyLong_FromSsize_t(i);
        if (k == NULL || PyList_Append(result, k) < 0)
            Py_CLEAR(result);
        Py_XDECREF(k);
    }
done:
    PyMem_Free(used);
    Py_DECREF(in_seq);
    return result;
}

/* ------------------------------------------------------------------- loop back edges */

/* How many of a node's inputs are control edges. */
static Py_ssize_t
control_inputs(PyObject *ins_obj)
{
    PyObject *ins = PySequence_Fast(ins_obj, "a node's inputs must be a sequence");
    if (ins == NULL)
        return -1;
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(ins); k++) {
        PyObject *edge[2];
        int control;
        if (unpack(PySequence_Fast_GET_ITEM(ins, k), 2, edge) < 0 ||
            (control = PyObject_RichCompareBool(edge[1], CONTROL, Py_EQ)) < 0) {
            Py_DECREF(ins);
            return -1;
        }
        total += control;
    }
    Py_DECREF(ins);
    return total;
}

static PyObject *
drop_loop_back_edges(PyObject *module, PyObject *args)
{
    PyObject *ops, *readers, *inputs, *indegree, *back_ops, *merge_ops;
    if (!PyArg_ParseTuple(args, "OOOO!OO:drop_loop_back_edges", &ops, &readers, &inputs, &PyList_Type, &indegree,
                          &back_ops, &merge_ops))
        return NULL;
    PyObject *op_seq = PySequence_Fast(ops, "ops must be a sequence");
    if (op_seq == NULL)
        return NULL;
    PyObject *reader_seq = PySequence_Fast(readers, "readers must be a sequence");
    PyObject *in_seq = reader_seq ? PySequence_Fast(inputs, "inputs must be a sequence") : NULL;
    PyObject *result = NULL;
    if (in_seq == NULL)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(op_seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        int back = PySequence_Contains(back_ops, PySequence_Fast_GET_ITEM(op_seq, i));
        if (back < 0)
            goto done;
        if (!back)
            continue;
        if (i >= PySequence_Fast_GET_SIZE(reader_seq)) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            goto done;
        }
        PyObject *edges = PySequence_Fast(PySequence_Fast_GET_ITEM(reader_seq, i), "a node's readers must be a sequence");
        if (edges == NULL)
            goto done;
        for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(edges); k++) {
            PyObject *edge[3];
            Py_ssize_t c, d, cin;
            int data, merge;
            if (unpack(PySequence_Fast_GET_ITEM(edges, k), 3, edge) < 0 ||
                (data = PyObject_RichCompareBool(edge[1], CONTROL, Py_NE)) < 0) {
                Py_DECREF(edges);
                goto done;
            }
            if (!data)
                continue;
            if (index_into(edge[0], PySequence_Fast_GET_SIZE(op_seq), &c) < 0 ||
                (merge = PySequence_Contains(merge_ops, PySequence_Fast_GET_ITEM(op_seq, c))) < 0) {
                Py_DECREF(edges);
                goto done;
            }
            if (!merge)
                continue;
            PyObject *count;
            if (index_into(edge[0], PySequence_Fast_GET_SIZE(in_seq), &cin) < 0 ||
                (d = control_inputs(PySequence_Fast_GET_ITEM(in_seq, cin))) < 0 ||
                index_into(edge[0], PyList_GET_SIZE(indegree), &c) < 0 ||
                (count = PyLong_FromSsize_t(1 + d)) == NULL) {
                Py_DECREF(edges);
                goto done;
            }
            PyList_SetItem(indegree, c, count);
        }
        Py_DECREF(edges);
    }
    result = Py_None;
    Py_INCREF(result);
done:
    Py_DECREF(op_seq);
    Py_XDECREF(reader_seq);
    Py_XDECREF(in_seq);
    return result;
}

/* -------------------------------------------------------------------------------- gather */

static PyObject *
gather(PyObject *module, PyObject *args)
{
    PyObject *old, *new, *order;
    if (!PyArg_ParseTuple(args, "OOO:gather", &old, &new, &order))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(order, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    PyObject *old_seq = NULL, *new_seq = NULL, *result = NULL;
    /* in native byte order: numpy's int32 is 'i', or 'l' where a C long has 32 bits */
    const char *format = view.format ? view.format : "B";
    if (format[0] == '=' || format[0] == '@')
        format++;
    if (view.itemsize != 4 || (strcmp(format, "i") != 0 && strcmp(format, "l") != 0)) {
        PyErr_SetString(PyExc_TypeError, "the order must be an array of 32-bit ints");
        goto done;
    }
    old_seq = PySequence_Fast(old, "old must be a sequence");
    new_seq = old_seq ? PySequence_Fast(new, "new must be a sequence") : NULL;
    if (new_seq == NULL)
        goto done;
    Py_ssize_t n_old = PySequence_Fast_GET_SIZE(old_seq), total = n_old + PySequence_Fast_GET_SIZE(new_seq);
    Py_ssize_t n = view.len / 4;
    const int32_t *at = (const int32_t *)view.buf;
    result = PyList_New(n);
    if (result == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i = at[k];
        if (i < 0)
            i += total;
        if (i < 0 || i >= total) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            Py_CLEAR(result);
            goto done;
        }
        PyObject *item = i < n_old ? PySequence_Fast_GET_ITEM(old_seq, i) : PySequence_Fast_GET_ITEM(new_seq, i - n_old);
        Py_INCREF(item);
        PyList_SET_ITEM(result, k, item);
    }
done:
    Py_XDECREF(old_seq);
    Py_XDECREF(new_seq);
    PyBuffer_Release(&view);
    return result;
}

/* -------------------------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"parse_inputs", parse_inputs, METH_VARARGS,
     "parse_inputs(nodes, names, index, dangling): every node's inputs as (producer, port) pairs."},
    {"renumbered", renumbered, METH_VARARGS, "renumbered(inputs, new_index): producers p replaced by new_index[p]."},
    {"consumers_of", consumers_of, METH_VARARGS,
     "consumers_of(inputs, ids): per producer, its (consumer, port, slot) triples."},
    {"kahn_order_by_readers", kahn_order_by_readers, METH_VARARGS,
     "kahn_order_by_readers(indegree, readers, ids=None): Kahn's order; indegree is consumed."},
    {"nodes_by_op", nodes_by_op, METH_VARARGS, "nodes_by_op(ids, ops): op type -> its nodes, in graph order."},
    {"falsy_positions", falsy_positions, METH_O, "falsy_positions(lists): the positions of the empty items."},
    {"unread_nodes", unread_nodes, METH_VARARGS, "unread_nodes(inputs, count): the nodes no input reads."},
    {"drop_loop_back_edges", drop_loop_back_edges, METH_VARARGS,
     "drop_loop_back_edges(ops, readers, inputs, indegree, back_ops, merge_ops): a loop's Merge counted "
     "ready once its control inputs and one data input are."},
    {"gather", gather, METH_VARARGS, "gather(old, new, order): [*old, *new][k] for every k of the int32 array order."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef edges_module = {
    PyModuleDef_HEAD_INIT, "_edges", "The per-node edge work of a graph index, in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__edges(void)
{
    EMPTY = PyTuple_New(0);
    ZERO = PyLong_FromLong(0);
    CONTROL = PyLong_FromLong(-1);
    INPUT_ATTR = PyUnicode_InternFromString("input");
    if (EMPTY == NULL || ZERO == NULL || CONTROL == NULL || INPUT_ATTR == NULL)
        return NULL;
    return PyModule_Create(&edges_module);
}

/* Reading a graph's edges, in C: NodeDef inputs into (producer, port) pairs, the pairs renumbered,
 * and a rewrite's per-node lists in the new order.
 *
 * Each function returns exactly what its pure-Python equivalent (edge_lists.py, layout.py) returns:
 * the same values in the same containers (tuples and lists), the caller's own int objects for node
 * indices, one shared empty tuple for every node without edges, and the same errors.  Indices read
 * from the caller's data are checked as Python indexing checks them (a negative index counts from
 * the end; out of range raises IndexError): odd input raises, it never reads past an array.
 */
#include "common.h"

static PyObject *EMPTY;      /* () */
static PyObject *ZERO;       /* 0, port of a plain input */
static PyObject *CONTROL;    /* -1, port of a control edge, and the producer of a dangling input */
static PyObject *INPUT_ATTR; /* "input" */

#define MAX_PORT_DIGITS 9

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
    return untracked_if_atomic(t);
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
parse_inputs(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *nodes, *names, *index, *dangling;
    if (!PyArg_ParseTuple(args, "OOO!O!:parse_inputs", &nodes, &names, &PyDict_Type, &index,
                          &PyList_Type, &dangling))
        return NULL;
    if (!PyDict_CheckExact(index)) {  /* a subclass may read its items otherwise */
        PyErr_SetString(PyExc_TypeError, "the name table must be a dict");
        return NULL;
    }
    PyObject *node_seq, *name_seq;
    if (open_two(nodes, "nodes must be a sequence", names, "names must be a sequence", &node_seq, &name_seq) < 0)
        return NULL;
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
renumbered(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *in_seq, *map;
    if (two_sequence_args(args, "OO:renumbered", "inputs must be a sequence", "new_index must be a sequence", &in_seq,
                          &map) < 0)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(in_seq);
    PyObject *result = PyList_New(n);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ins = inputs_at(in_seq, i);
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
            if (edge_from(PySequence_Fast_GET_ITEM(ins, slot), PySequence_Fast_GET_SIZE(map), edge, &p) < 0 ||
                (renamed = pair(PySequence_Fast_GET_ITEM(map, p), edge[1])) == NULL) {
                fill_none(out, slot, k);  /* so that the tuple can be freed */
                Py_DECREF(ins);
                goto fail;
            }
            PyTuple_SET_ITEM(out, slot, renamed);
        }
        untracked_if_atomic(out);
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

/* -------------------------------------------------------------------------------- gather */

static PyObject *
gather(PyObject *Py_UNUSED(module), PyObject *args)
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
    if (open_two(old, "old must be a sequence", new, "new must be a sequence", &old_seq, &new_seq) < 0)
        goto done;
    Py_ssize_t n_old = PySequence_Fast_GET_SIZE(old_seq), total = n_old + PySequence_Fast_GET_SIZE(new_seq);
    Py_ssize_t n = view.len / 4;
    const int32_t *at = (const int32_t *)view.buf;
    result = PyList_New(n);
    if (result == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i;
        if (checked_index(at[k], total, "list index out of range", &i) < 0) {
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
    {"gather", gather, METH_VARARGS, "gather(old, new, order): [*old, *new][k] for every k of the int32 array order."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef module_def;

PyMODINIT_FUNC
PyInit__edges(void)
{
    EMPTY = PyTuple_New(0);
    ZERO = PyLong_FromLong(0);
    CONTROL = PyLong_FromLong(-1);
    INPUT_ATTR = PyUnicode_InternFromString("input");
    if (EMPTY == NULL || ZERO == NULL || CONTROL == NULL || INPUT_ATTR == NULL)
        return NULL;
    return new_module(&module_def, "_edges", "Reading a graph's edges, in C.", methods);
}

/* The per-node tables a graph's edges give, in C: the consumers of every producer, the op table
 * and the unread nodes.
 *
 * Each function returns exactly what its pure-Python equivalent (edge_lists.py) returns: the same
 * values in the same containers (tuples and lists), the caller's own int objects for node indices,
 * one shared empty tuple for every node without edges, and the same errors.  Indices read from the
 * caller's data are checked as Python indexing checks them (a negative index counts from the end;
 * out of range raises IndexError): odd input raises, it never reads past an array.
 */
#include "common.h"

static PyObject *EMPTY; /* () */

/* ------------------------------------------------------------------------- consumers_of */

static PyObject *
consumers_of(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *in_seq, *id_seq;
    if (two_sequence_args(args, "OO:consumers_of", "inputs must be a sequence", "ids must be a sequence", &in_seq,
                          &id_seq) < 0)
        return NULL;
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
        PyObject *ins = inputs_at(in_seq, c);
        if (ins == NULL)
            goto done;
        for (Py_ssize_t slot = 0; slot < PySequence_Fast_GET_SIZE(ins); slot++) {
            PyObject *edge[2];
            Py_ssize_t p;
            if (edge_from(PySequence_Fast_GET_ITEM(ins, slot), n, edge, &p) < 0) {
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
            fill_none(readers, 0, count[p]);  /* placeholders until filled */
        PyList_SET_ITEM(result, p, readers);
    }
    /* second pass: the (consumer, port, slot) triples, by consumer then slot */
    for (Py_ssize_t c = 0; c < n; c++) {
        PyObject *ins = inputs_at(in_seq, c);
        if (ins == NULL)
            goto fail;
        PyObject *consumer = PySequence_Fast_GET_ITEM(id_seq, c);
        for (Py_ssize_t slot = 0; slot < PySequence_Fast_GET_SIZE(ins); slot++) {
            PyObject *edge[2], *triple, *slot_int;
            Py_ssize_t p;
            if (edge_from(PySequence_Fast_GET_ITEM(ins, slot), n, edge, &p) < 0) {
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
            untracked_if_atomic(triple);
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
    for (Py_ssize_t p = 0; p < n; p++)
        untracked_if_atomic(PyList_GET_ITEM(result, p));
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

/* --------------------------------------------------------------------------- nodes_by_op */

static PyObject *
nodes_by_op(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *id_seq, *op_seq;
    if (two_sequence_args(args, "OO:nodes_by_op", "ids must be a sequence", "ops must be a sequence", &id_seq,
                          &op_seq) < 0)
        return NULL;
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
falsy_positions(PyObject *Py_UNUSED(module), PyObject *lists)
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
        if (empty && append_int(result, i) < 0)
            Py_CLEAR(result);
    }
    Py_DECREF(seq);
    return result;
}

static PyObject *
unread_nodes(PyObject *Py_UNUSED(module), PyObject *args)
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
        PyObject *ins = inputs_at(in_seq, c);
        if (ins == NULL)
            goto done;
        for (Py_ssize_t slot = 0; slot < PySequence_Fast_GET_SIZE(ins); slot++) {
            PyObject *edge[2];
            Py_ssize_t p = -1;
            if (unpack(PySequence_Fast_GET_ITEM(ins, slot), 2, edge) < 0 ||
                ((p = PyNumber_AsSsize_t(edge[0], PyExc_IndexError)) == -1 && PyErr_Occurred()) ||
                checked_index(p, n, "bytearray index out of range", &p) < 0) {
                Py_DECREF(ins);
                goto done;
            }
            used[p] = 1;
        }
        Py_DECREF(ins);
    }
    result = PyList_New(0);
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        if (!used[i] && append_int(result, i) < 0)
            Py_CLEAR(result);
    }
done:
    PyMem_Free(used);
    Py_DECREF(in_seq);
    return result;
}

/* -------------------------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"consumers_of", consumers_of, METH_VARARGS,
     "consumers_of(inputs, ids): per producer, its (consumer, port, slot) triples."},
    {"nodes_by_op", nodes_by_op, METH_VARARGS, "nodes_by_op(ids, ops): op type -> its nodes, in graph order."},
    {"falsy_positions", falsy_positions, METH_O, "falsy_positions(lists): the positions of the empty items."},
    {"unread_nodes", unread_nodes, METH_VARARGS, "unread_nodes(inputs, count): the nodes no input reads."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef module_def;

PyMODINIT_FUNC
PyInit__tables(void)
{
    EMPTY = PyTuple_New(0);
    if (EMPTY == NULL)
        return NULL;
    return new_module(&module_def, "_tables", "The per-node tables a graph's edges give, in C.", methods);
}

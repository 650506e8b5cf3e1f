/* A graph's topological order, in C: Kahn's order over the readers of every node, and a TF1 loop's
 * back edges left out of the counts as TensorFlow's import leaves them.
 *
 * Each function does exactly what its pure-Python equivalent (toposort.py) does: the same order of
 * the caller's own int objects, the same counts left in the indegree list, and the same errors.
 * Indices read from the caller's data are checked as Python indexing checks them (a negative index
 * counts from the end; out of range raises IndexError): odd input raises, it never reads past an
 * array.
 */
#include "common.h"

static PyObject *CONTROL; /* -1, port of a control edge */

/* ----------------------------------------------------------------- kahn_order_by_readers */

static PyObject *
kahn_order_by_readers(PyObject *Py_UNUSED(module), PyObject *args)
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
        PyObject *edges = readers_at(reader_seq, where[q]);
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

/* ------------------------------------------------------------------- loop back edges */

/* How many of a node's inputs are control edges. */
static Py_ssize_t
control_inputs(PyObject *in_seq, Py_ssize_t c)
{
    PyObject *ins = inputs_at(in_seq, c);
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
drop_loop_back_edges(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *ops, *readers, *inputs, *indegree, *back_ops, *merge_ops;
    if (!PyArg_ParseTuple(args, "OOOO!OO:drop_loop_back_edges", &ops, &readers, &inputs, &PyList_Type, &indegree,
                          &back_ops, &merge_ops))
        return NULL;
    PyObject *op_seq = PySequence_Fast(ops, "ops must be a sequence");
    if (op_seq == NULL)
        return NULL;
    PyObject *reader_seq, *in_seq, *result = NULL;
    if (open_two(readers, "readers must be a sequence", inputs, "inputs must be a sequence", &reader_seq, &in_seq) < 0)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(op_seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        int back = PySequence_Contains(back_ops, PySequence_Fast_GET_ITEM(op_seq, i));
        if (back < 0)
            goto done;
        if (!back)
            continue;
        PyObject *edges = readers_at(reader_seq, i);
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
                (d = control_inputs(in_seq, cin)) < 0 ||
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

/* -------------------------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"kahn_order_by_readers", kahn_order_by_readers, METH_VARARGS,
     "kahn_order_by_readers(indegree, readers, ids=None): Kahn's order; indegree is consumed."},
    {"drop_loop_back_edges", drop_loop_back_edges, METH_VARARGS,
     "drop_loop_back_edges(ops, readers, inputs, indegree, back_ops, merge_ops): a loop's Merge counted "
     "ready once its control inputs and one data input are."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef module_def;

PyMODINIT_FUNC
PyInit__order(void)
{
    CONTROL = PyLong_FromLong(-1);
    if (CONTROL == NULL)
        return NULL;
    return new_module(&module_def, "_order", "A graph's topological order, in C.", methods);
}

/* What the graph core's C extensions share: Python's indexing checks, reading per-node sequences
 * and (producer, port) edges, growable arrays of references, and small builders.  Each extension
 * includes this header before its own code; every function here is static inline, so a module
 * compiles in only what it uses.
 */
#ifndef SCOPEFUSION_NATIVE_COMMON_H
#define SCOPEFUSION_NATIVE_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------------------ indexing */

/* `i` as an index into `n` items, as Python reads it (negative counts from the end); out of range
 * raises IndexError with `message` (list and bytearray indexing say it differently). */
static inline int
checked_index(Py_ssize_t i, Py_ssize_t n, const char *message, Py_ssize_t *out)
{
    if (i < 0)
        i += n;
    if (i < 0 || i >= n) {
        PyErr_SetString(PyExc_IndexError, message);
        return -1;
    }
    *out = i;
    return 0;
}

/* `obj` as an index into a sequence of `n` items, as Python's list indexing reads it. */
static inline int
index_into(PyObject *obj, Py_ssize_t n, Py_ssize_t *out)
{
    Py_ssize_t i = PyNumber_AsSsize_t(obj, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred())
        return -1;
    return checked_index(i, n, "list index out of range", out);
}

/* --------------------------------------------------------------------------- sequences */

/* `first` and `second` as fast sequences (new references), each error message naming its
 * argument; on failure neither is held and both are NULL. */
static inline int
open_two(PyObject *first, const char *first_error, PyObject *second, const char *second_error,
         PyObject **first_seq, PyObject **second_seq)
{
    *second_seq = NULL;
    *first_seq = PySequence_Fast(first, first_error);
    if (*first_seq == NULL)
        return -1;
    *second_seq = PySequence_Fast(second, second_error);
    if (*second_seq == NULL) {
        Py_CLEAR(*first_seq);
        return -1;
    }
    return 0;
}

/* A function's two arguments, parsed by `format` ("OO:name"), as fast sequences (new references);
 * each error message names its argument.  On failure neither is held and both are NULL. */
static inline int
two_sequence_args(PyObject *args, const char *format, const char *first_error, const char *second_error,
                  PyObject **first_seq, PyObject **second_seq)
{
    PyObject *first, *second;
    *first_seq = *second_seq = NULL;
    if (!PyArg_ParseTuple(args, format, &first, &second))
        return -1;
    return open_two(first, first_error, second, second_error, first_seq, second_seq);
}

/* zip(a, b, strict=True)'s complaint about sequences of other lengths. */
static inline int
check_lengths(Py_ssize_t first, Py_ssize_t second)
{
    if (first == second)
        return 0;
    PyErr_Format(PyExc_ValueError, "zip() argument 2 is %s than argument 1", second < first ? "shorter" : "longer");
    return -1;
}

/* Node `i`'s inputs (an item of the fast sequence `inputs`) as a fast sequence (new reference). */
static inline PyObject *
inputs_at(PyObject *inputs, Py_ssize_t i)
{
    return PySequence_Fast(PySequence_Fast_GET_ITEM(inputs, i), "a node's inputs must be a sequence");
}

/* Node `i`'s readers (`readers[i]` of the fast sequence `readers`, `i` checked as list indexing
 * checks it) as a fast sequence (new reference). */
static inline PyObject *
readers_at(PyObject *readers, Py_ssize_t i)
{
    if (checked_index(i, PySequence_Fast_GET_SIZE(readers), "list index out of range", &i) < 0)
        return NULL;
    return PySequence_Fast(PySequence_Fast_GET_ITEM(readers, i), "a node's readers must be a sequence");
}

/* -------------------------------------------------------------------------------- edges */

/* The `size` items of `item` (a tuple or list, borrowed from it), as `a, b = item` unpacks. */
static inline int
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

/* A (producer, port) edge unpacked into `edge`, its producer read as an index into `n` nodes. */
static inline int
edge_from(PyObject *item, Py_ssize_t n, PyObject **edge, Py_ssize_t *producer)
{
    return unpack(item, 2, edge) < 0 || index_into(edge[0], n, producer) < 0 ? -1 : 0;
}

/* -------------------------------------------------------------------------------- builders */

/* Stop the cyclic garbage collector tracking the filled tuple `t` when nothing in it can be part of
 * a cycle: exact ints and strs, and tuples it no longer tracks.  The collector does the same to such
 * a tuple the first time it walks it (and the tuple is immutable); done here, the edge lists of a
 * large graph are never walked at all.  Returns `t`. */
static inline PyObject *
untracked_if_atomic(PyObject *t)
{
    if (t == NULL || !PyObject_GC_IsTracked(t))
        return t;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(t); k++) {
        PyObject *item = PyTuple_GET_ITEM(t, k);
        if (!PyLong_CheckExact(item) && !PyUnicode_CheckExact(item) &&
            !(PyTuple_CheckExact(item) && !PyObject_GC_IsTracked(item)))
            return t;
    }
    PyObject_GC_UnTrack(t);
    return t;
}

static inline PyObject *
pair(PyObject *a, PyObject *b)
{
    PyObject *t = PyTuple_New(2);
    if (t == NULL)
        return NULL;
    Py_INCREF(a);
    PyTuple_SET_ITEM(t, 0, a);
    Py_INCREF(b);
    PyTuple_SET_ITEM(t, 1, b);
    return untracked_if_atomic(t);
}

/* Items [from, to) of the new tuple `t` set to None (placeholders, or so that it can be freed). */
static inline void
fill_none(PyObject *t, Py_ssize_t from, Py_ssize_t to)
{
    for (Py_ssize_t k = from; k < to; k++) {
        Py_INCREF(Py_None);
        PyTuple_SET_ITEM(t, k, Py_None);
    }
}

/* Append the int `value` to `list`. */
static inline int
append_int(PyObject *list, Py_ssize_t value)
{
    PyObject *number = PyLong_FromSsize_t(value);
    if (number == NULL)
        return -1;
    int failed = PyList_Append(list, number);
    Py_DECREF(number);
    return failed;
}

/* ----------------------------------------------------------------------- growable arrays */

/* `items`, an array of `size` items of `item_size` bytes in PyMem memory with room for `*capacity`,
 * with room for one more: the same pointer while there is, else the array moved to twice the room
 * (`first` items at first).  NULL with MemoryError set, `items` left as it was. */
static inline void *
room_for_one(void *items, Py_ssize_t size, Py_ssize_t *capacity, size_t item_size, Py_ssize_t first)
{
    if (size < *capacity)
        return items;
    Py_ssize_t more = *capacity ? 2 * *capacity : first;
    void *moved = PyMem_Realloc(items, (size_t)more * item_size);
    if (moved == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    *capacity = more;
    return moved;
}


/* A growable array of owned references. */
typedef struct {
    PyObject **items;
    Py_ssize_t size, capacity;
} Stack;

static inline int
stack_push(Stack *s, PyObject *obj)  /* steals obj, also on failure */
{
    PyObject **items = room_for_one(s->items, s->size, &s->capacity, sizeof(PyObject *), 16);
    if (items == NULL) {
        Py_DECREF(obj);
        return -1;
    }
    s->items = items;
    s->items[s->size++] = obj;
    return 0;
}

static inline void
stack_clear(Stack *s)
{
    for (Py_ssize_t k = 0; k < s->size; k++)
        Py_DECREF(s->items[k]);
    s->size = 0;
}

static inline void
stack_free(Stack *s)
{
    stack_clear(s);
    PyMem_Free(s->items);
    s->items = NULL;
    s->capacity = 0;
}

/* ------------------------------------------------------------------------------ modules */

/* An extension's module: its definition `def` (static storage, the module keeps pointing at it)
 * filled in with `name`, `doc` and `methods`; no per-module state. */
static inline PyObject *
new_module(PyModuleDef *def, const char *name, const char *doc, PyMethodDef *methods)
{
    PyModuleDef filled = {PyModuleDef_HEAD_INIT, name, doc, -1, methods, NULL, NULL, NULL, NULL};
    *def = filled;
    return PyModule_Create(def);
}

#endif

/* The scope tree's names, in C: the scope every node lies directly in and the scopes created for
 * them, as core/scope/layout.py's pure-Python path works them out.
 *
 * Node `a/b/c` lies directly in scope `a/b`; the root is "".  Scopes are created in order of first
 * appearance, each after its missing ancestors (outermost first).  Nodes in a row often lie in the
 * same scope: a node's scope is compared with the one before it, so most nodes need neither a new
 * string nor a dictionary lookup.
 */
#include "common.h"

/* Where `text`'s scope name ends (the last '/'), 0 when it has none: the scope is text[:end]. */
static Py_ssize_t
scope_end(PyObject *text)
{
    Py_ssize_t slash = PyUnicode_FindChar(text, '/', 0, PyUnicode_GET_LENGTH(text), -1);
    return slash < 0 ? (slash == -2 ? -2 : 0) : slash;
}

typedef struct {
    PyObject *created;  /* scope name -> creation number */
    PyObject *parent;   /* list: per creation number, the parent's (-1 for the root) */
    PyObject *depth;    /* list: per creation number, the depth */
    Py_ssize_t *depths; /* the same depths, read back in C */
    Py_ssize_t size, capacity;
} Tree;

/* Create scope `name` under the scope numbered `p`; returns its number. */
static Py_ssize_t
tree_add(Tree *tree, PyObject *name, Py_ssize_t p)
{
    Py_ssize_t k = tree->size;
    Py_ssize_t *depths = room_for_one(tree->depths, k, &tree->capacity, sizeof(Py_ssize_t), 64);
    if (depths == NULL)
        return -1;
    tree->depths = depths;
    Py_ssize_t depth = p < 0 ? 0 : tree->depths[p] + 1;
    PyObject *number = PyLong_FromSsize_t(k), *parent = PyLong_FromSsize_t(p), *level = PyLong_FromSsize_t(depth);
    int failed = number == NULL || parent == NULL || level == NULL || PyDict_SetItem(tree->created, name, number) < 0 ||
                 PyList_Append(tree->parent, parent) < 0 || PyList_Append(tree->depth, level) < 0;
    Py_XDECREF(number);
    Py_XDECREF(parent);
    Py_XDECREF(level);
    if (failed)
        return -1;
    tree->depths[k] = depth;
    tree->size = k + 1;
    return k;
}

/* The creation number of scope `path`, created (with its missing ancestors, outermost first) if new. */
static Py_ssize_t
tree_scope(Tree *tree, PyObject *path)
{
    PyObject *known = PyDict_GetItemWithError(tree->created, path);
    if (known != NULL)
        return PyLong_AsSsize_t(known);
    if (PyErr_Occurred())
        return -1;
    /* walk up to the first ancestor already there (the root always is), without recursion:
     * names may be thousands of scopes deep */
    PyObject *missing = PyList_New(0);
    if (missing == NULL)
        return -1;
    Py_ssize_t p = -1;
    PyObject *name = path;
    Py_INCREF(name);
    for (;;) {
        if (PyList_Append(missing, name) < 0)
            break;
        Py_ssize_t end = scope_end(name);
        PyObject *up = end < 0 ? NULL : PyUnicode_Substring(name, 0, end);
        Py_DECREF(name);
        name = up;
        if (name == NULL)
            break;
        known = PyDict_GetItemWithError(tree->created, name);
        if (known != NULL) {
            p = PyLong_AsSsize_t(known);
            break;
        }
        if (PyErr_Occurred())
            break;
    }
    Py_XDECREF(name);
    if (p < 0 || PyErr_Occurred()) {
        Py_DECREF(missing);
        return -1;
    }
    for (Py_ssize_t k = PyList_GET_SIZE(missing) - 1; k >= 0 && p >= 0; k--)
        p = tree_add(tree, PyList_GET_ITEM(missing, k), p);
    Py_DECREF(missing);
    return p;
}

static PyObject *
scope_tree(PyObject *Py_UNUSED(module), PyObject *names)
{
    PyObject *seq = PySequence_Fast(names, "node names must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Tree tree = {PyDict_New(), PyList_New(0), PyList_New(0), NULL, 0, 0};
    PyObject *node_scope = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    PyObject *root = PyUnicode_FromStringAndSize("", 0), *previous = NULL, *result = NULL;
    if (tree.created == NULL || tree.parent == NULL || tree.depth == NULL || node_scope == NULL || root == NULL ||
        tree_add(&tree, root, -1) < 0)
        goto done;
    int64_t *at = (int64_t *)PyBytes_AS_STRING(node_scope);
    Py_ssize_t scope = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyUnicode_Check(name)) {
            PyErr_Format(PyExc_TypeError, "a node name must be a str, not %.100s", Py_TYPE(name)->tp_name);
            goto done;
        }
        Py_ssize_t end = scope_end(name);
        if (end < 0)
            goto done;
        int same = 0;
        if (previous != NULL && PyUnicode_GET_LENGTH(previous) == end) {
            same = end == 0 || PyUnicode_Tailmatch(name, previous, 0, end, -1);
            if (same < 0)
                goto done;
        }
        if (!same) {
            PyObject *path = PyUnicode_Substring(name, 0, end);
            if (path == NULL)
                goto done;
            scope = tree_scope(&tree, path);
            Py_XSETREF(previous, path);
            if (scope < 0)
                goto done;
        }
        at[i] = scope;
    }
    result = Py_BuildValue("(OOOO)", tree.created, tree.parent, tree.depth, node_scope);
done:
    Py_XDECREF(previous);
    Py_XDECREF(root);
    Py_XDECREF(node_scope);
    Py_XDECREF(tree.created);
    Py_XDECREF(tree.parent);
    Py_XDECREF(tree.depth);
    PyMem_Free(tree.depths);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"scope_tree", scope_tree, METH_O,
     "scope_tree(node_names) -> (created, parent, depth, node_scope): scope name -> creation number, per "
     "scope its parent's number and its depth, and per node its scope's number (int64 bytes)."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef module_def;

PyMODINIT_FUNC
PyInit__scopes(void)
{
    return new_module(&module_def, "_scopes", "The scope tree's names, in C.", methods);
}

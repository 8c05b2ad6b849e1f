/* agentlog._native_scrub: the walk over mapping keys behind agentlog._scrub.may_change.
 *
 * Optional. agentlog/_scrub.py walks the same way in Python (_has_credential_key) when
 * this module was not built; tests hold both to each other and to the scrubber itself.
 * The walk decides nothing about names: it collects the exact-str keys that are not in
 * the caller's set of names already known to be safe, and Python classifies those
 * (is_credential_name), so the rules stay in one place.
 *
 * A model response is mostly small dicts (logprob entries): in Python the walk cost a
 * call and two set tests per dict, about half of what recording the response cost.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *TOKEN;   /* "token": a credential name, except in a logprob entry */
static PyObject *LOGPROB; /* "logprob": the key that marks a logprob entry */

/* The types a value may have without the walk looking into it: exactly _scrub._PLAIN. */
static int is_plain(PyTypeObject *t)
{
    return t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type ||
           t == &PyBool_Type || t == Py_TYPE(Py_None) || t == &PyBytes_Type;
}

static int walk(PyObject *obj, PyObject *safe, PyObject *unknown, int depth_left);

/* 1: unsure (the caller answers True); 0: walked; -1: a Python error is set. */
static int walk_value(PyObject *v, PyObject *safe, PyObject *unknown, int depth_left)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyDict_Type || t == &PyList_Type || t == &PyTuple_Type)
        return walk(v, safe, unknown, depth_left);
    return is_plain(t) ? 0 : 1;
}

static int walk_dict(PyObject *obj, PyObject *safe, PyObject *unknown, int depth_left)
{
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int logprob_entry = -1; /* looked up on the first unknown "token" only */
    int verdict = 0;
    while (verdict == 0 && PyDict_Next(obj, &pos, &k, &v)) {
        /* A lookup of "logprob" may run a non-str key's __eq__, which may change the dict:
         * hold the key and value while they are used. */
        Py_INCREF(k);
        Py_INCREF(v);
        if (PyUnicode_CheckExact(k)) {
            int is_safe = PySet_Contains(safe, k);
            if (is_safe < 0) {
                verdict = -1;
            } else if (!is_safe) {
                int exempt = 0;
                if (PyUnicode_Compare(k, TOKEN) == 0) {
                    if (logprob_entry < 0)
                        logprob_entry = PyDict_Contains(obj, LOGPROB);
                    if (logprob_entry < 0)
                        verdict = -1;
                    exempt = logprob_entry == 1;
                } else if (PyErr_Occurred()) {
                    verdict = -1;
                }
                if (verdict == 0 && !exempt && PySet_Add(unknown, k) < 0)
                    verdict = -1;
            }
        } else if (PyUnicode_Check(k)) {
            /* A str subclass: the scrubber tests its name. As in the Python walk, one
             * equal to a safe name is safe, and any other makes the walk unsure. */
            int is_safe = PySet_Contains(safe, k);
            verdict = is_safe < 0 ? -1 : !is_safe;
        }
        if (verdict == 0)
            verdict = walk_value(v, safe, unknown, depth_left - 1);
        Py_DECREF(k);
        Py_DECREF(v);
    }
    return verdict;
}

static int walk(PyObject *obj, PyObject *safe, PyObject *unknown, int depth_left)
{
    if (depth_left < 0)
        return 1; /* _scrub redacts every container below its depth limit */
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyDict_Type)
        return walk_dict(obj, safe, unknown, depth_left);
    if (t == &PyList_Type || t == &PyTuple_Type) {
        /* Size read on each turn: nothing here runs Python code on a list's items, but a
         * dict below may (see walk_dict), and it may shrink this list. */
        for (Py_ssize_t i = 0; i < Py_SIZE(obj); i++) {
            PyObject *item = t == &PyList_Type ? PyList_GET_ITEM(obj, i)
                                               : PyTuple_GET_ITEM(obj, i);
            Py_INCREF(item);
            int verdict = walk_value(item, safe, unknown, depth_left - 1);
            Py_DECREF(item);
            if (verdict != 0)
                return verdict;
        }
        return 0;
    }
    return is_plain(t) ? 0 : 1;
}

PyDoc_STRVAR(unknown_key_names_doc,
"unknown_key_names(obj, safe, depth_left) -> True | set[str]\n\n"
"Walks dicts, lists and tuples (exact types) in obj. True when the walk cannot vouch\n"
"for obj: a value of any other type than str, int, float, bool, None and bytes, a str\n"
"subclass as a key, or a container more than depth_left levels down. Otherwise the set\n"
"of exact-str keys not in safe (a set of str), without \"token\" where its dict also\n"
"has \"logprob\" (a logprob entry's token text).");

static PyObject *unknown_key_names(PyObject *self, PyObject *args)
{
    PyObject *obj, *safe;
    int depth_left;
    if (!PyArg_ParseTuple(args, "OO!i:unknown_key_names", &obj, &PySet_Type, &safe,
                          &depth_left))
        return NULL;
    PyObject *unknown = PySet_New(NULL);
    if (unknown == NULL)
        return NULL;
    int verdict = walk(obj, safe, unknown, depth_left);
    if (verdict == 0)
        return unknown;
    Py_DECREF(unknown);
    if (verdict < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"unknown_key_names", unknown_key_names, METH_VARARGS, unknown_key_names_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "agentlog._native_scrub",
    "The key walk of agentlog._scrub.may_change (optional; see agentlog._scrub).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__native_scrub(void)
{
    TOKEN = PyUnicode_InternFromString("token");
    LOGPROB = PyUnicode_InternFromString("logprob");
    if (TOKEN == NULL || LOGPROB == NULL)
        return NULL;
    return PyModule_Create(&module);
}

/* agentlog.adapters._fast_dump: the JSON body of an SDK response model, without pydantic's
 * serializer walk.
 *
 * Optional. agentlog/adapters/_recording.py (dump_body) uses it for the response objects
 * of the openai and anthropic SDKs and falls back to ``model_dump(mode="json",
 * exclude_unset=True)`` whenever it cannot vouch for the result; tests hold both to each
 * other on every response shape the adapters record.
 *
 * What it computes, for a model whose class Python vetted (no computed fields, no custom
 * serializers, no excluded fields, names not aliases): the set fields, in ``__dict__``
 * order (those in ``__pydantic_fields_set__``), then every extra field, each value as
 * model_dump's JSON mode gives it for JSON-native values: str, int, float, bool and None
 * as they are, lists and tuples as lists, dicts with str keys as dicts, vetted models as
 * such dicts. Any other value, key or class stops it: Python then asks pydantic.
 *
 * model_dump cost 11-15 us for a one-token chat response with ten top logprobs, about a
 * fifth of what recording the call cost beyond its cache key.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Containers (models included) a body may nest before the reader leaves it to pydantic,
 * whose serializer refuses from 255 levels on: below its limit, so that the reader never
 * returns a body model_dump would refuse. */
#define MAX_DEPTH 200

static PyObject *FIELDS_SET; /* "__pydantic_fields_set__" */
static PyObject *EXTRA;      /* "__pydantic_extra__" */

/* Results of the converters: a new reference, or NULL with one of these outcomes set. */
enum outcome { OK = 0, UNSURE = 1, ERROR = -1 };

typedef struct {
    PyObject *vetted;  /* set of model classes Python vetted */
    PyObject *unknown; /* out: the first model class not yet vetted (borrowed from the
                          value being walked, referenced here), when UNSURE */
    enum outcome outcome;
    int depth_left;
} walk_t;

static PyObject *convert(PyObject *v, walk_t *w);

static PyObject *unsure(walk_t *w)
{
    if (w->outcome == OK)
        w->outcome = UNSURE;
    return NULL;
}

static PyObject *failed(walk_t *w)
{
    w->outcome = ERROR;
    return NULL;
}

/* The dict of a vetted model's set and extra fields. */
static PyObject *dump_model(PyObject *m, walk_t *w)
{
    PyObject *fields = PyObject_GenericGetDict(m, NULL);
    if (fields == NULL) {
        PyErr_Clear();
        return unsure(w);
    }
    if (!PyDict_CheckExact(fields)) {
        Py_DECREF(fields);
        return unsure(w);
    }
    PyObject *set = PyObject_GetAttr(m, FIELDS_SET);
    if (set == NULL) {
        PyErr_Clear();
        Py_DECREF(fields);
        return unsure(w);
    }
    PyObject *extra = NULL;
    PyObject *out = NULL;
    if (!PyAnySet_CheckExact(set))
        goto unsure_out;
    extra = PyObject_GetAttr(m, EXTRA);
    if (extra == NULL) {
        PyErr_Clear();
        goto unsure_out;
    }
    if (extra != Py_None && !PyDict_CheckExact(extra))
        goto unsure_out;
    out = PyDict_New();
    if (out == NULL)
        goto error_out;
    for (int part = 0; part < 2; part++) {
        PyObject *source = part == 0 ? fields : extra;
        if (source == Py_None)
            continue;
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(source, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k))
                goto unsure_out;
            if (part == 0) {
                int is_set = PySet_Contains(set, k);
                if (is_set < 0)
                    goto error_out;
                if (!is_set)
                    continue;
            }
            Py_INCREF(k);
            Py_INCREF(v);
            PyObject *c = convert(v, w);
            int stored = c == NULL ? -1 : PyDict_SetItem(out, k, c);
            Py_XDECREF(c);
            Py_DECREF(k);
            Py_DECREF(v);
            if (stored < 0) {
                if (c != NULL)
                    w->outcome = ERROR;
                goto fail_out;
            }
        }
    }
    Py_DECREF(fields);
    Py_DECREF(set);
    Py_DECREF(extra);
    return out;
unsure_out:
    unsure(w);
    goto fail_out;
error_out:
    w->outcome = ERROR;
fail_out:
    Py_DECREF(fields);
    Py_DECREF(set);
    Py_XDECREF(extra);
    Py_XDECREF(out);
    return NULL;
}

static PyObject *convert_items(PyObject *v, walk_t *w)
{
    Py_ssize_t n = Py_SIZE(v);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return failed(w);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i >= Py_SIZE(v)) { /* a list shrunk by code run below (a key's __eq__) */
            Py_DECREF(out);
            return unsure(w);
        }
        PyObject *item = PyList_CheckExact(v) ? PyList_GET_ITEM(v, i) : PyTuple_GET_ITEM(v, i);
        Py_INCREF(item);
        PyObject *c = convert(item, w);
        Py_DECREF(item);
        if (c == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, c);
    }
    return out;
}

static PyObject *convert_dict(PyObject *v, walk_t *w)
{
    PyObject *out = PyDict_New();
    if (out == NULL)
        return failed(w);
    Py_ssize_t pos = 0;
    PyObject *k, *item;
    while (PyDict_Next(v, &pos, &k, &item)) {
        if (!PyUnicode_CheckExact(k)) { /* JSON mode turns other keys into str: pydantic's */
            Py_DECREF(out);
            return unsure(w);
        }
        Py_INCREF(k);
        Py_INCREF(item);
        PyObject *c = convert(item, w);
        int stored = c == NULL ? -1 : PyDict_SetItem(out, k, c);
        if (c != NULL && stored < 0)
            w->outcome = ERROR;
        Py_XDECREF(c);
        Py_DECREF(k);
        Py_DECREF(item);
        if (stored < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyObject *convert(PyObject *v, walk_t *w)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type ||
        t == &PyBool_Type || v == Py_None) {
        Py_INCREF(v);
        return v;
    }
    if (--w->depth_left < 0) {
        w->depth_left++;
        return unsure(w);
    }
    PyObject *out;
    if (t == &PyList_Type || t == &PyTuple_Type) {
        out = convert_items(v, w);
    } else if (t == &PyDict_Type) {
        out = convert_dict(v, w);
    } else {
        int vetted = PySet_Contains(w->vetted, (PyObject *)t);
        if (vetted < 0) {
            out = failed(w);
        } else if (vetted) {
            out = dump_model(v, w);
        } else {
            if (w->unknown == NULL) {
                w->unknown = (PyObject *)t;
                Py_INCREF(w->unknown);
            }
            out = unsure(w);
        }
    }
    w->depth_left++;
    return out;
}

PyDoc_STRVAR(dump_set_fields_doc,
"dump_set_fields(model, vetted) -> dict | type | None\n\n"
"The JSON-mode dict of model's set and extra fields (see the module docstring), when\n"
"every model class in it is in vetted (a set of classes). Otherwise the first model\n"
"class met that is not in vetted (vet it and call again), or None: a value it does not\n"
"convert (ask pydantic).");

static PyObject *dump_set_fields(PyObject *self, PyObject *args)
{
    PyObject *model, *vetted;
    if (!PyArg_ParseTuple(args, "OO!:dump_set_fields", &model, &PySet_Type, &vetted))
        return NULL;
    walk_t w = {vetted, NULL, OK, MAX_DEPTH};
    PyObject *out = convert(model, &w);
    if (out != NULL) {
        if (!PyDict_Check(out)) { /* not a model at all */
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        return out;
    }
    if (w.outcome == ERROR) {
        Py_XDECREF(w.unknown);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_SystemError, "dump_set_fields failed without an error");
        return NULL;
    }
    PyErr_Clear();
    if (w.unknown != NULL)
        return w.unknown;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"dump_set_fields", dump_set_fields, METH_VARARGS, dump_set_fields_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "agentlog.adapters._fast_dump",
    "The JSON body of an SDK response model (optional; see agentlog.adapters._recording).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__fast_dump(void)
{
    FIELDS_SET = PyUnicode_InternFromString("__pydantic_fields_set__");
    EXTRA = PyUnicode_InternFromString("__pydantic_extra__");
    if (FIELDS_SET == NULL || EXTRA == NULL)
        return NULL;
    return PyModule_Create(&module);
}

/* agentlog._native: the integer passes of noise generator fmix64-gumbel/2 in one loop each.
 *
 * Optional. agentlog/_noise.py computes the same words with numpy passes and uses this
 * module only when it was built; tests hold both to each other and to the per-id
 * definition (candidate_key_v2), bit for bit. Only integer arithmetic and one exact
 * conversion are done here: the logarithms of the Gumbel draws stay numpy's, whose
 * implementation differs from the C library's in the last bit on some CPUs.
 *
 * No numpy headers: the arrays come in through the buffer protocol, so building needs
 * only a C compiler and Python's headers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define C1 0xFF51AFD7ED558CCDULL
#define C2 0xC4CEB9FE1A85EC53ULL
#define PHI 0x9E3779B97F4A7C15ULL

static inline uint64_t fmix64(uint64_t x)
{
    x ^= x >> 33;
    x *= C1;
    x ^= x >> 33;
    x *= C2;
    x ^= x >> 33;
    return x;
}

static inline uint64_t load_le64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8); /* unaligned; the x86-64 and aarch64 builds are little-endian */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

/* One row of uniforms: row[i] = float((z >> 10) | 1) * 2**-54, z = fmix64(keys[i] ^ base). */
static inline void fill_uniform_row(const unsigned char *keys, Py_ssize_t n, uint64_t base,
                                    double *row)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t key;
        memcpy(&key, keys + 8 * i, 8); /* a native uint64 array, maybe unaligned */
        uint64_t z = fmix64(key ^ base);
        row[i] = (double)((z >> 10) | 1) * 0x1p-54;
    }
}

static int check_words(Py_buffer *view, const char *what)
{
    if (view->len % 8 != 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s must hold 8-byte words; found a buffer of %zd bytes", what,
                     view->len);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(uniform_row_doc,
"uniform_row(keys, base, out)\n\n"
"Entry i of out (float64, len(keys) values) becomes the uniform of\n"
"z = fmix64(keys[i] ^ base): float((z >> 10) | 1) * 2**-54, which is\n"
"((z >> 11) + 1/2) * 2**-53 (an odd integer below 2**54 rounds to float as twice the\n"
"half-integer does). keys: uint64 buffer; base: an int below 2**64.");

static PyObject *uniform_row(PyObject *self, PyObject *args)
{
    Py_buffer keys, out;
    PyObject *base_obj;
    if (!PyArg_ParseTuple(args, "y*Ow*", &keys, &base_obj, &out))
        return NULL;
    PyObject *result = NULL;
    if (check_words(&keys, "keys") < 0)
        goto done;
    uint64_t base = PyLong_AsUnsignedLongLong(base_obj); /* raises past 2**64 - 1 */
    if (base == (uint64_t)-1 && PyErr_Occurred())
        goto done;
    Py_ssize_t n = keys.len / 8;
    if (out.len != n * 8) {
        PyErr_Format(PyExc_ValueError,
                     "out must hold %zd float64 values (%zd bytes); found %zd bytes", n,
                     n * 8, out.len);
        goto done;
    }
    fill_uniform_row(keys.buf, n, base, out.buf);
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&keys);
    PyBuffer_Release(&out);
    return result;
}

PyDoc_STRVAR(step_rows_doc,
"step_rows(keys, seed_stream, first, out)\n\n"
"uniform_row(keys, base, out) for the step bases of steps first, first + 1, ... (one row\n"
"each, as many as out holds): base = fmix64(seed_stream ^ fmix64(step + phi)), where\n"
"seed_stream = fmix64(seed ^ stream key) (agentlog._noise.step_base).");

static PyObject *step_rows(PyObject *self, PyObject *args)
{
    Py_buffer keys, out;
    unsigned long long seed_stream, first;
    if (!PyArg_ParseTuple(args, "y*KKw*", &keys, &seed_stream, &first, &out))
        return NULL;
    PyObject *result = NULL;
    if (check_words(&keys, "keys") < 0)
        goto done;
    Py_ssize_t n = keys.len / 8;
    if (n == 0 || out.len % (n * 8) != 0) {
        PyErr_Format(PyExc_ValueError,
                     "out must hold whole rows of %zd float64 values; found %zd bytes", n,
                     out.len);
        goto done;
    }
    Py_ssize_t rows = out.len / (n * 8);
    for (Py_ssize_t r = 0; r < rows; r++) {
        uint64_t b = fmix64((uint64_t)seed_stream ^ fmix64((uint64_t)first + (uint64_t)r + PHI));
        fill_uniform_row(keys.buf, n, b, (double *)out.buf + r * n);
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&keys);
    PyBuffer_Release(&out);
    return result;
}

PyDoc_STRVAR(check_probs_doc,
"check_probs(p) -> (total, smallest) or None\n\n"
"The sum and the smallest entry of a float64 buffer in one pass, or None when an entry is\n"
"not finite (the caller then diagnoses it). The sum is a plain running sum: for the\n"
"tolerance check only, never for normalising (numpy's pairwise sum does that).");

static PyObject *check_probs(PyObject *self, PyObject *arg)
{
    Py_buffer p;
    if (PyObject_GetBuffer(arg, &p, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    if (check_words(&p, "p") < 0)
        goto done;
    Py_ssize_t n = p.len / 8;
    const unsigned char *b = p.buf;
    double total = 0.0, lo = INFINITY;
    int finite = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        double x;
        memcpy(&x, b + 8 * i, 8);
        finite &= isfinite(x) != 0;
        total += x;
        lo = x < lo ? x : lo;
    }
    if (!finite) {
        result = Py_None;
        Py_INCREF(result);
    } else {
        result = Py_BuildValue("(dd)", total, lo);
    }
done:
    PyBuffer_Release(&p);
    return result;
}

PyDoc_STRVAR(joined_keys_doc,
"joined_keys(body, n, tag, out)\n\n"
"Keys of the n ids in body, each followed by one NUL byte (the UTF-8 of NUL-joined str\n"
"ids and a final NUL), into out (uint64, n words): k = fmix64(fmix64(L ^ tag) ^ h),\n"
"h the XOR over the id's zero-padded little-endian words w_j of m(w_j * (2j + 1) * phi),\n"
"m(x) = (x ^ (x >> 29)) * C1, L its length in bytes.\n"
"Raises ValueError unless body holds exactly n NUL-ended ids.");

static PyObject *joined_keys(PyObject *self, PyObject *args)
{
    Py_buffer body, out;
    Py_ssize_t n;
    unsigned long long tag;
    if (!PyArg_ParseTuple(args, "y*nKw*", &body, &n, &tag, &out))
        return NULL;
    PyObject *result = NULL;
    if (out.len != n * 8) {
        PyErr_Format(PyExc_ValueError, "out must hold %zd uint64 keys (%zd bytes); found %zd",
                     n, n * 8, out.len);
        goto done;
    }
    const unsigned char *p = body.buf;
    const unsigned char *end = p + body.len;
    unsigned char *o = out.buf;
    uint64_t last_length = (uint64_t)-1, last_word = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *stop = p < end ? memchr(p, 0, (size_t)(end - p)) : NULL;
        if (stop == NULL) {
            PyErr_Format(PyExc_ValueError,
                         "body must hold %zd NUL-ended ids; found %zd", n, i);
            goto done;
        }
        Py_ssize_t length = stop - p;
        uint64_t h = 0, k = PHI; /* K_j = (2j + 1) phi: phi, then + 2 phi per word */
        Py_ssize_t j = 0;
        for (; j + 8 <= length; j += 8, k += 2 * PHI) {
            uint64_t x = load_le64(p + j) * k;
            h ^= (x ^ (x >> 29)) * C1;
        }
        if (j < length) {
            unsigned char tail[8] = {0};
            memcpy(tail, p + j, (size_t)(length - j));
            uint64_t x = load_le64(tail) * k;
            h ^= (x ^ (x >> 29)) * C1;
        }
        if ((uint64_t)length != last_length) { /* generated ids repeat one length */
            last_length = (uint64_t)length;
            last_word = fmix64((uint64_t)length ^ (uint64_t)tag);
        }
        uint64_t key = fmix64(h ^ last_word);
        memcpy(o + 8 * i, &key, 8);
        p = stop + 1;
    }
    if (p != end) {
        PyErr_Format(PyExc_ValueError,
                     "body must hold exactly %zd NUL-ended ids; %zd bytes are left after them",
                     n, (Py_ssize_t)(end - p));
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&body);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"uniform_row", uniform_row, METH_VARARGS, uniform_row_doc},
    {"joined_keys", joined_keys, METH_VARARGS, joined_keys_doc},
    {"step_rows", step_rows, METH_VARARGS, step_rows_doc},
    {"check_probs", check_probs, METH_O, check_probs_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "agentlog._native",
    "The integer passes of noise generator fmix64-gumbel/2 (optional; see agentlog._noise).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    return PyModule_Create(&module);
}

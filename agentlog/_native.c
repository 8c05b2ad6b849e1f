/* agentlog._native: the integer passes of noise generator fmix64-gumbel/2 in one loop each,
 * select's vector checks, and the preparation of a pool of str ids (its encoding, keys and
 * identity check: agentlog/_pools.py).
 *
 * Optional. agentlog/_noise.py and agentlog/_pools.py compute the same words and bytes in
 * Python and numpy and use this module only when it was built; tests hold both to each
 * other, to msgspec's encoding and to the per-id definition (candidate_key_v2), bit for
 * bit. The uniforms are integer arithmetic and one exact conversion; the logarithms
 * of the Gumbel draws stay numpy's, whose implementation differs from the C library's in
 * the last bit on some CPUs. The C library's log serves only gumbel_argmax's choice, which
 * may then differ from numpy's between scores a few units in the last place apart.
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

/* The key of one id of `length` bytes at p (see joined_keys_doc). The length word
 * fmix64(L ^ tag) is remembered across calls in *last_length / *last_word: generated ids
 * repeat one length. */
static inline uint64_t id_key(const unsigned char *p, Py_ssize_t length, uint64_t tag,
                              uint64_t *last_length, uint64_t *last_word,
                              const unsigned char *end)
{ /* end: where the buffer holding the id ends (a short tail is read as one masked word
   * when 8 bytes from its start lie inside the buffer) */
    uint64_t h = 0, k = PHI; /* K_j = (2j + 1) phi: phi, then + 2 phi per word */
    Py_ssize_t j = 0;
    for (; j + 8 <= length; j += 8, k += 2 * PHI) {
        uint64_t x = load_le64(p + j) * k;
        h ^= (x ^ (x >> 29)) * C1;
    }
    if (j < length) { /* the zero-padded last word */
        Py_ssize_t r = length - j; /* 1..7 bytes */
        uint64_t w = 0;
        if (end - (p + j) >= 8) {
            w = load_le64(p + j) & ((1ULL << (8 * r)) - 1);
        } else {
            for (Py_ssize_t b = 0; b < r; b++)
                w |= (uint64_t)p[j + b] << (8 * b);
        }
        uint64_t x = w * k;
        h ^= (x ^ (x >> 29)) * C1;
    }
    if ((uint64_t)length != *last_length) {
        *last_length = (uint64_t)length;
        *last_word = fmix64((uint64_t)length ^ tag);
    }
    return fmix64(h ^ *last_word);
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

/* One pass over n float64 values: their plain running sum and smallest entry; 0 when an
 * entry is not finite. */
static int sum_and_smallest(const unsigned char *b, Py_ssize_t n, double *total, double *lo)
{
    double sum = 0.0, smallest = INFINITY;
    int finite = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        double x;
        memcpy(&x, b + 8 * i, 8);
        finite &= isfinite(x) != 0;
        sum += x;
        smallest = x < smallest ? x : smallest;
    }
    *total = sum;
    *lo = smallest;
    return finite;
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
    double total, lo;
    int finite = sum_and_smallest(p.buf, p.len / 8, &total, &lo);
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

static int float_vector(PyObject *obj, Py_buffer *view)
{ /* 1 when obj is a non-empty 1-D C-contiguous float64 buffer (view filled), else 0 */
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (view->ndim == 1 && view->itemsize == 8 && view->format != NULL &&
        strcmp(view->format, "d") == 0 && view->len >= 8)
        return 1;
    PyBuffer_Release(view);
    return 0;
}

PyDoc_STRVAR(plain_probs_doc,
"plain_probs(p, tolerance) -> float or None\n\n"
"The smallest entry of p when p is the plain case of select's check: a 1-D C-contiguous\n"
"buffer of native float64 (format 'd'), not empty, every entry finite, none negative, and\n"
"a running sum within tolerance of 1. None otherwise, and for anything that is not such\n"
"a buffer: the caller's general check then converts, diagnoses and says what is wrong.");

static PyObject *plain_probs(PyObject *self, PyObject *args)
{
    PyObject *obj;
    double tolerance;
    if (!PyArg_ParseTuple(args, "Od", &obj, &tolerance))
        return NULL;
    Py_buffer p;
    if (!float_vector(obj, &p)) /* the general path's business */
        Py_RETURN_NONE;
    PyObject *result;
    double total, lo;
    int finite = sum_and_smallest(p.buf, p.len / 8, &total, &lo);
    if (finite && lo >= 0.0 && fabs(total - 1.0) <= tolerance) {
        result = PyFloat_FromDouble(lo);
    } else {
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&p);
    return result;
}

/* The one loop behind gumbel_argmax, gumbel_argmax_entropy and entropy: over p (and the
 * draws g when not NULL), the first index of the largest log(p[i]) + g[i] into *best, and
 * H = -sum of p[i] * log(p[i]) over the positive entries, summed in index order. One
 * function, not inlined, built without floating-point contraction (setup.py): select's
 * live span event and export's entropy from the stored vector are then the same bits. */
#if defined(_MSC_VER)
#define NOINLINE __declspec(noinline)
#else
#define NOINLINE __attribute__((noinline))
#endif

static NOINLINE double
scan_vector(const unsigned char *pb, const unsigned char *gb, Py_ssize_t n, Py_ssize_t *best)
{
    double acc = 0.0, top = -INFINITY;
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        double pi;
        memcpy(&pi, pb + 8 * i, 8); /* maybe unaligned: memcpy loads */
        double lp = log(pi);
        if (pi > 0.0)
            acc += pi * lp;
        if (gb != NULL) {
            double gi;
            memcpy(&gi, gb + 8 * i, 8);
            double score = lp + gi;
            if (score > top) { /* strict: the first of equal scores, as numpy's argmax */
                top = score;
                at = i;
            }
        }
    }
    *best = at;
    return -acc;
}

/* p and g as two float vectors of one length, or 0 (the caller returns None). */
static int two_vectors(PyObject *args, Py_buffer *p, Py_buffer *g)
{
    PyObject *p_obj, *g_obj;
    if (!PyArg_ParseTuple(args, "OO", &p_obj, &g_obj))
        return -1;
    if (!float_vector(p_obj, p))
        return 0;
    if (!float_vector(g_obj, g)) {
        PyBuffer_Release(p);
        return 0;
    }
    if (p->len != g->len) {
        PyBuffer_Release(g);
        PyBuffer_Release(p);
        return 0;
    }
    return 1;
}

PyDoc_STRVAR(gumbel_argmax_doc,
"gumbel_argmax(p, draws) -> int or None\n\n"
"The first index of the largest log(p[i]) + draws[i] (log 0 = -inf), for two 1-D\n"
"C-contiguous native float64 buffers of one length (at least 1), p non-negative and the\n"
"draws finite (as select passes them); None for any other buffer (the caller's numpy\n"
"path then draws). The C library's log may differ from numpy's in the last bit, so the\n"
"index can differ from numpy's only between scores within a few units in the last\n"
"place: the rounding the choice check allows (agentlog._draw_match.choice_agrees).");

/* gumbel_argmax's and gumbel_argmax_entropy's body: the index, with the entropy or not. */
static PyObject *argmax_of(PyObject *args, int with_entropy)
{
    Py_buffer p, g;
    int ok = two_vectors(args, &p, &g);
    if (ok < 0)
        return NULL;
    if (!ok)
        Py_RETURN_NONE;
    Py_ssize_t best;
    double h = scan_vector(p.buf, g.buf, p.len / 8, &best);
    PyBuffer_Release(&g);
    PyBuffer_Release(&p);
    return with_entropy ? Py_BuildValue("nd", best, h) : PyLong_FromSsize_t(best);
}

static PyObject *gumbel_argmax(PyObject *self, PyObject *args)
{
    return argmax_of(args, 0);
}

PyDoc_STRVAR(gumbel_argmax_entropy_doc,
"gumbel_argmax_entropy(p, draws) -> (int, float) or None\n\n"
"gumbel_argmax's index and, from the same pass, entropy(p): what select's span event\n"
"needs, without numpy's log, add, argmax and dot. None where gumbel_argmax is None.");

static PyObject *gumbel_argmax_entropy(PyObject *self, PyObject *args)
{
    return argmax_of(args, 1);
}

PyDoc_STRVAR(entropy_doc,
"entropy(p) -> float or None\n\n"
"-sum of p[i] * log(p[i]) over the positive entries of a 1-D C-contiguous native float64\n"
"buffer (at least 1 entry), in index order with the C library's log: bit for bit the\n"
"entropy gumbel_argmax_entropy returns for the same p. None for any other buffer.");

static PyObject *entropy(PyObject *self, PyObject *obj)
{
    Py_buffer p;
    if (!float_vector(obj, &p))
        Py_RETURN_NONE;
    Py_ssize_t best;
    double h = scan_vector(p.buf, NULL, p.len / 8, &best);
    PyBuffer_Release(&p);
    return PyFloat_FromDouble(h);
}

PyDoc_STRVAR(joined_keys_doc,
"joined_keys(body, n, tag, out)\n\n"
"Keys of the n ids in body, each followed by one NUL byte (the UTF-8 of NUL-joined str\n"
"ids and a final NUL), into out (uint64, n words): k = fmix64(fmix64(L ^ tag) ^ h),\n"
"h the XOR over the id's zero-padded little-endian words w_j of m(w_j * (2j + 1) * phi),\n"
"m(x) = (x ^ (x >> 29)) * C1, L its length in bytes.\n"
"Raises ValueError unless body holds exactly n NUL-ended ids.");

/* The arguments (body, n, tag, out) of joined_keys and str_pool_keys, out checked to hold
 * n keys; -1 with an exception set (and both buffers released) otherwise. */
static int keys_args(PyObject *args, Py_buffer *body, Py_ssize_t *n, unsigned long long *tag,
                     Py_buffer *out)
{
    if (!PyArg_ParseTuple(args, "y*nKw*", body, n, tag, out))
        return -1;
    if (out->len != *n * 8) {
        PyErr_Format(PyExc_ValueError, "out must hold %zd uint64 keys (%zd bytes); found %zd",
                     *n, *n * 8, out->len);
        PyBuffer_Release(body);
        PyBuffer_Release(out);
        return -1;
    }
    return 0;
}

static PyObject *joined_keys(PyObject *self, PyObject *args)
{
    Py_buffer body, out;
    Py_ssize_t n;
    unsigned long long tag;
    if (keys_args(args, &body, &n, &tag, &out) < 0)
        return NULL;
    PyObject *result = NULL;
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
        uint64_t key = id_key(p, length, tag, &last_length, &last_word, end);
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

/* msgpack headers as msgspec writes them: the smallest form that holds the length. */
static Py_ssize_t str_header_size(Py_ssize_t length)
{
    return length < 32 ? 1 : length < 256 ? 2 : length < 65536 ? 3 : 5;
}

static unsigned char *put_header(unsigned char *o, Py_ssize_t length, unsigned char fix,
                                 unsigned char base16)
{ /* base16: the 16-bit form's type byte; the 8-bit form (str only) is base16 - 1 */
    uint32_t v = (uint32_t)length;
    if (fix == 0xa0 && length < 32) {
        *o++ = (unsigned char)(fix | v);
    } else if (fix == 0x90 && length < 16) {
        *o++ = (unsigned char)(fix | v);
    } else if (fix == 0xa0 && length < 256) {
        *o++ = (unsigned char)(base16 - 1);
        *o++ = (unsigned char)v;
    } else if (length < 65536) {
        *o++ = base16;
        *o++ = (unsigned char)(v >> 8);
        *o++ = (unsigned char)v;
    } else {
        *o++ = (unsigned char)(base16 + 1);
        *o++ = (unsigned char)(v >> 24);
        *o++ = (unsigned char)(v >> 16);
        *o++ = (unsigned char)(v >> 8);
        *o++ = (unsigned char)v;
    }
    return o;
}

PyDoc_STRVAR(str_pool_doc,
"str_pool(ids) -> (encoded, ids_tuple) or None\n\n"
"For a list or tuple whose items are all exact str, each with a UTF-8 encoding: the ids\n"
"as a tuple (ids itself when it is one; a list is copied first, and only the copy is\n"
"read) and the msgpack array of them, byte for byte what msgspec writes (the smallest\n"
"header for the array and for each str). None for any other sequence or id: the\n"
"caller's general path handles those, and says what is wrong.");

/* The UTF-8 of a str: read in place for an ASCII str (no call), else Python's cached copy.
 * NULL with an exception set when it has none (a lone surrogate). */
static inline const char *utf8_of(PyObject *s, Py_ssize_t *length)
{
    if (PyUnicode_IS_COMPACT_ASCII(s)) {
        *length = PyUnicode_GET_LENGTH(s);
        return (const char *)PyUnicode_DATA(s);
    }
    return PyUnicode_AsUTF8AndSize(s, length);
}

static PyObject *str_pool(PyObject *self, PyObject *seq)
{
    PyObject *ids;
    if (PyTuple_CheckExact(seq)) {
        ids = seq;
        Py_INCREF(ids);
    } else if (PyList_CheckExact(seq)) {
        ids = PyList_AsTuple(seq); /* before any reading: nothing can change it after */
        if (ids == NULL)
            return NULL;
    } else {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(ids);
    PyObject *encoded = NULL;
    if ((uint64_t)n > 0xFFFFFFFFu)
        goto not_plain;
    Py_ssize_t total = n < 16 ? 1 : n < 65536 ? 3 : 5;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(ids, i);
        Py_ssize_t length;
        if (!PyUnicode_CheckExact(item))
            goto not_plain;
        if (utf8_of(item, &length) == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
                goto fail;
            PyErr_Clear(); /* a lone surrogate: the general path raises the clear error */
            goto not_plain;
        }
        if ((uint64_t)length > 0xFFFFFFFFu)
            goto not_plain;
        total += str_header_size(length) + length;
    }
    encoded = PyBytes_FromStringAndSize(NULL, total);
    if (encoded == NULL)
        goto fail;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(encoded);
    o = put_header(o, n, 0x90, 0xdc);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t length;
        const char *utf8 = utf8_of(PyTuple_GET_ITEM(ids, i), &length);
        o = put_header(o, length, 0xa0, 0xda); /* cached by the first pass: cannot fail */
        memcpy(o, utf8, (size_t)length);
        o += length;
    }
    PyObject *result = PyTuple_Pack(2, encoded, ids);
    Py_DECREF(encoded);
    Py_DECREF(ids);
    return result;
not_plain:
    Py_DECREF(ids);
    Py_RETURN_NONE;
fail:
    Py_DECREF(ids);
    return NULL;
}

static int read_length(const unsigned char **pp, const unsigned char *end, int bytes,
                       Py_ssize_t *length)
{
    const unsigned char *p = *pp;
    if (end - p < bytes)
        return -1;
    uint32_t v = 0;
    for (int b = 0; b < bytes; b++)
        v = (v << 8) | p[b];
    *pp = p + bytes;
    *length = (Py_ssize_t)v;
    return 0;
}

PyDoc_STRVAR(str_pool_keys_doc,
"str_pool_keys(encoded, n, tag, out) -> bool or None\n\n"
"Keys (as joined_keys computes them) of the n str ids of encoded, a msgpack array of str\n"
"(str_pool's), into out (uint64, n words). True when the n keys are distinct, which\n"
"proves the ids distinct; False when two keys are equal (a repeated id, or a 64-bit\n"
"collision: the caller tells them apart); None above 2**20 ids, where the check is left\n"
"to the caller (its table would take 16 bytes an id). Raises ValueError unless encoded is\n"
"exactly such an array of n str.");

#define MAX_CHECKED_IDS ((Py_ssize_t)1 << 20)

static PyObject *str_pool_keys(PyObject *self, PyObject *args)
{
    Py_buffer body, out;
    Py_ssize_t n;
    unsigned long long tag;
    if (keys_args(args, &body, &n, &tag, &out) < 0)
        return NULL;
    PyObject *result = NULL;
    uint64_t *table = NULL;
    const unsigned char *p = body.buf, *end = p + body.len;
    Py_ssize_t count = -1;
    if (p < end) {
        unsigned char h = *p++;
        if ((h & 0xF0) == 0x90)
            count = h & 0x0F;
        else if ((h == 0xdc && read_length(&p, end, 2, &count) < 0) ||
                 (h == 0xdd && read_length(&p, end, 4, &count) < 0) ||
                 (h != 0xdc && h != 0xdd))
            count = -1;
    }
    if (count != n) {
        PyErr_Format(PyExc_ValueError, "encoded must be a msgpack array of %zd str; found "
                     "%s", n, count < 0 ? "no array header" : "another length");
        goto done;
    }
    /* Open addressing over the keys (fmix64 output: the low bits are uniform). Key 0
     * cannot mark an empty slot, so it is tracked on its own. */
    int checked = n <= MAX_CHECKED_IDS, distinct = checked, seen_zero = 0;
    size_t slots = 16;
    while (checked && slots < 2 * (size_t)n)
        slots <<= 1;
    table = checked ? PyMem_Calloc(slots, sizeof(uint64_t)) : NULL;
    if (checked && table == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    uint64_t last_length = (uint64_t)-1, last_word = 0;
    unsigned char *o = out.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t length = -1;
        unsigned char h = p < end ? *p++ : 0;
        if ((h & 0xE0) == 0xa0)
            length = h & 0x1F;
        else if (h == 0xd9 || h == 0xda || h == 0xdb) {
            if (read_length(&p, end, h == 0xd9 ? 1 : h == 0xda ? 2 : 4, &length) < 0)
                length = -1;
        }
        if (length < 0 || end - p < length) {
            PyErr_Format(PyExc_ValueError,
                         "encoded must be a msgpack array of %zd str; item %zd is not one",
                         n, i);
            goto done;
        }
        uint64_t key = id_key(p, length, (uint64_t)tag, &last_length, &last_word, end);
        memcpy(o + 8 * i, &key, 8);
        p += length;
        if (!distinct)
            continue;
        if (key == 0) {
            distinct = !seen_zero;
            seen_zero = 1;
            continue;
        }
        for (size_t s = (size_t)key & (slots - 1);; s = (s + 1) & (slots - 1)) {
            if (table[s] == 0) {
                table[s] = key;
                break;
            }
            if (table[s] == key) {
                distinct = 0;
                break;
            }
        }
    }
    if (p != end) {
        PyErr_Format(PyExc_ValueError, "encoded must be exactly a msgpack array of %zd str; "
                     "%zd bytes are left after it", n, (Py_ssize_t)(end - p));
        goto done;
    }
    if (checked) {
        result = PyBool_FromLong(distinct);
    } else {
        result = Py_None;
        Py_INCREF(result);
    }
done:
    PyMem_Free(table);
    PyBuffer_Release(&body);
    PyBuffer_Release(&out);
    return result;
}

PyDoc_STRVAR(same_items_doc,
"same_items(ids, pool_ids) -> bool\n\n"
"Whether the list ids holds exactly the objects of the tuple pool_ids, in order (identity,\n"
"not equality: one comparison of two pointer arrays). The pool's tuple keeps its objects\n"
"alive, so none of them can have been freed and its address reused.");

static PyObject *same_items(PyObject *self, PyObject *args)
{
    PyObject *ids, *pool_ids;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &ids, &PyTuple_Type, &pool_ids))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ids);
    if (n != PyTuple_GET_SIZE(pool_ids))
        Py_RETURN_FALSE;
    if (n == 0)
        Py_RETURN_TRUE;
    return PyBool_FromLong(memcmp(((PyListObject *)ids)->ob_item,
                                  ((PyTupleObject *)pool_ids)->ob_item,
                                  (size_t)n * sizeof(PyObject *)) == 0);
}

static PyMethodDef methods[] = {
    {"uniform_row", uniform_row, METH_VARARGS, uniform_row_doc},
    {"joined_keys", joined_keys, METH_VARARGS, joined_keys_doc},
    {"step_rows", step_rows, METH_VARARGS, step_rows_doc},
    {"check_probs", check_probs, METH_O, check_probs_doc},
    {"plain_probs", plain_probs, METH_VARARGS, plain_probs_doc},
    {"str_pool", str_pool, METH_O, str_pool_doc},
    {"same_items", same_items, METH_VARARGS, same_items_doc},
    {"gumbel_argmax", gumbel_argmax, METH_VARARGS, gumbel_argmax_doc},
    {"gumbel_argmax_entropy", gumbel_argmax_entropy, METH_VARARGS, gumbel_argmax_entropy_doc},
    {"entropy", entropy, METH_O, entropy_doc},
    {"str_pool_keys", str_pool_keys, METH_VARARGS, str_pool_keys_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "agentlog._native",
    "The integer passes of noise generator fmix64-gumbel/2 and the preparation of str pools "
    "(optional; see agentlog._noise and agentlog._pools).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    return PyModule_Create(&module);
}

/* Compiled twin of rivven_kproto/codec/records/records.py's _decode_records: the records section
 * of a (decompressed) v2 batch as tuples, in one pass, so a consumer of a large fetch does no
 * per-field Python work.
 *
 * decode(payload, count) -> list[(offset_delta, timestamp_delta, key, value, headers, attributes)]
 * decode_values(payload, count, first_delta) -> (values, last_delta): the values of the records
 *     whose offset delta is at least first_delta, and the largest such delta (-1: none); every
 *     record is checked as decode() checks it, only no object is made for anything else
 *
 * It accepts exactly what the Python decoder accepts (the same length, count and varint checks);
 * on anything else it raises ValueError without detail, and records.py then runs the Python
 * decoder for the precise RecordFormatError. The unit tests compare both on valid and hostile input.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MIN_RECORD_SIZE 7
#define MIN_HEADER_SIZE 2

typedef struct {
    const uint8_t *data;
    Py_ssize_t pos;
    Py_ssize_t end;
} Reader;

/* Base-128 varint of at most max_bytes bytes and at most max_value; -1 when malformed. */
static int read_raw(Reader *r, int max_bytes, uint64_t max_value, uint64_t *out) {
    uint64_t value = 0;
    int shift = 0;
    for (int n = 0; n < max_bytes; n++) {
        if (r->pos >= r->end) return -1;
        uint8_t byte = r->data[r->pos++];
        uint64_t bits = (uint64_t)(byte & 0x7F);
        if (shift == 63 && bits > 1) return -1; /* beyond 64 bits */
        value |= bits << shift;
        if (byte < 0x80) {
            if (value > max_value) return -1;
            *out = value;
            return 0;
        }
        shift += 7;
    }
    return -1;
}

static int read_varint(Reader *r, int64_t *out) {
    uint64_t raw;
    if (read_raw(r, 5, 0xFFFFFFFFull, &raw) < 0) return -1;
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
}

static int read_varlong(Reader *r, int64_t *out) {
    uint64_t raw;
    if (read_raw(r, 10, UINT64_MAX, &raw) < 0) return -1;
    *out = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
    return 0;
}

/* A nullable bytes field: a new reference (None for null), or NULL when malformed. With keep 0
 * it is only checked and skipped (Py_None, borrowed, stands for "fine"). */
static PyObject *read_bytes_kept(Reader *r, int keep) {
    int64_t length;
    if (read_varint(r, &length) < 0) return NULL;
    if (length == -1) {
        if (keep) Py_RETURN_NONE;
        return Py_None;
    }
    if (length < -1 || length > r->end - r->pos) return NULL;
    PyObject *out = keep ? PyBytes_FromStringAndSize((const char *)r->data + r->pos, (Py_ssize_t)length) : Py_None;
    r->pos += (Py_ssize_t)length;
    return out;
}

static PyObject *read_bytes(Reader *r) { return read_bytes_kept(r, 1); }

/* One record checked as decode_one checks it; *value_out gets a new reference to its value
 * (None for null) and *offset_delta its offset delta. -1 when malformed. */
static int check_one(Reader *body, PyObject **value_out, int64_t *offset_delta) {
    int64_t timestamp_delta, count;
    if (body->pos >= body->end) return -1;
    body->pos++; /* attributes */
    if (read_varlong(body, &timestamp_delta) < 0 || read_varint(body, offset_delta) < 0) return -1;
    if (read_bytes_kept(body, 0) == NULL) return -1; /* key */
    PyObject *value = read_bytes(body);
    if (value == NULL) return -1;
    if (read_varint(body, &count) < 0 || count < 0 || count > (body->end - body->pos) / MIN_HEADER_SIZE) goto bad;
    for (int64_t i = 0; i < count; i++) {
        int64_t key_length;
        if (read_varint(body, &key_length) < 0) goto bad;
        if (key_length < 0 || key_length > body->end - body->pos) goto bad;
        PyObject *header_key = PyUnicode_DecodeUTF8((const char *)body->data + body->pos, (Py_ssize_t)key_length, "strict");
        if (header_key == NULL) goto bad;
        Py_DECREF(header_key);
        body->pos += (Py_ssize_t)key_length;
        if (read_bytes_kept(body, 0) == NULL) goto bad;
    }
    if (body->pos != body->end) goto bad;
    *value_out = value;
    return 0;
bad:
    Py_DECREF(value);
    return -1;
}

static PyObject *decode_one(Reader *body) {
    PyObject *key = NULL, *value = NULL, *headers = NULL, *result = NULL;
    int64_t timestamp_delta, offset_delta, count;
    if (body->pos >= body->end) return NULL;
    int attributes = (int8_t)body->data[body->pos++];
    if (read_varlong(body, &timestamp_delta) < 0 || read_varint(body, &offset_delta) < 0) return NULL;
    if ((key = read_bytes(body)) == NULL) goto done;
    if ((value = read_bytes(body)) == NULL) goto done;
    if (read_varint(body, &count) < 0) goto done;
    if (count < 0 || count > (body->end - body->pos) / MIN_HEADER_SIZE) goto done;
    if ((headers = PyList_New((Py_ssize_t)count)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        int64_t key_length;
        if (read_varint(body, &key_length) < 0) goto done;
        if (key_length < 0 || key_length > body->end - body->pos) goto done;
        PyObject *header_key = PyUnicode_DecodeUTF8((const char *)body->data + body->pos, (Py_ssize_t)key_length, "strict");
        if (header_key == NULL) goto done;
        body->pos += (Py_ssize_t)key_length;
        PyObject *header_value = read_bytes(body);
        if (header_value == NULL) {
            Py_DECREF(header_key);
            goto done;
        }
        PyObject *pair = PyTuple_Pack(2, header_key, header_value);
        Py_DECREF(header_key);
        Py_DECREF(header_value);
        if (pair == NULL) goto done;
        PyList_SET_ITEM(headers, i, pair);
    }
    if (body->pos != body->end) goto done;
    result = Py_BuildValue("(LLOOOi)", (long long)offset_delta, (long long)timestamp_delta, key, value, headers, attributes);
done:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    return result;
}

static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &view, &count)) return NULL;
    PyObject *out = NULL;
    Reader r = {(const uint8_t *)view.buf, 0, view.len};
    if (count < 0 || count > view.len / MIN_RECORD_SIZE) goto malformed;
    if ((out = PyList_New(count)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length;
        if (read_varint(&r, &length) < 0) goto malformed;
        if (length < 0 || length > r.end - r.pos) goto malformed;
        Reader body = {r.data, r.pos, r.pos + (Py_ssize_t)length};
        PyObject *record = decode_one(&body);
        if (record == NULL) goto malformed;
        PyList_SET_ITEM(out, i, record);
        r.pos = body.end;
    }
    if (r.pos != r.end) goto malformed;
    goto done;
malformed:
    Py_CLEAR(out);
    PyErr_Clear(); /* e.g. a UnicodeDecodeError: the Python decoder names the fault */
    PyErr_SetString(PyExc_ValueError, "malformed records");
done:
    PyBuffer_Release(&view);
    return out;
}

static PyObject *decode_values(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long first_delta;
    if (!PyArg_ParseTuple(args, "y*nL", &view, &count, &first_delta)) return NULL;
    PyObject *out = NULL;
    int64_t last = INT64_MIN;  /* any kept delta is larger (a delta may be negative) */
    Reader r = {(const uint8_t *)view.buf, 0, view.len};
    if (count < 0 || count > view.len / MIN_RECORD_SIZE) goto malformed;
    if ((out = PyList_New(0)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, offset_delta;
        PyObject *value;
        if (read_varint(&r, &length) < 0) goto malformed;
        if (length < 0 || length > r.end - r.pos) goto malformed;
        Reader body = {r.data, r.pos, r.pos + (Py_ssize_t)length};
        if (check_one(&body, &value, &offset_delta) < 0) goto malformed;
        r.pos = body.end;
        if (offset_delta < first_delta) {
            Py_DECREF(value);
            continue;
        }
        int failed = PyList_Append(out, value);
        Py_DECREF(value);
        if (failed < 0) goto malformed;
        if (offset_delta > last) last = offset_delta;
    }
    if (r.pos != r.end) goto malformed;
    PyBuffer_Release(&view);
    PyObject *result = Py_BuildValue("(NL)", out, (long long)last);
    return result;
malformed:
    Py_CLEAR(out);
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "malformed records");
done:
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, "The records of a v2 batch payload as tuples (see records._decode_records)."},
    {"decode_values", decode_values, METH_VARARGS, "The values of a v2 batch payload from an offset delta on."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_decode", NULL, -1, methods};

PyMODINIT_FUNC PyInit__decode(void) { return PyModule_Create(&module); }

/* Compiled twin of rivven_kproto/codec/records/records.py's encode_record: the records section
 * of a v2 batch, every record with its length prefix, in one pass over Record objects.
 *
 * encode(records) -> bytes
 *
 * ``records`` is a sequence of objects with the attributes of records.Record (attributes,
 * timestamp_delta, offset_delta, key, value, headers: [(str, bytes | None)]). The output is
 * byte-identical to b"".join(map(encode_record, records)), which the unit tests check; producers
 * use it so that encoding a large batch does no per-record Python work.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint8_t *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buffer;

static int reserve(Buffer *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    uint8_t *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static Py_ssize_t uvarint_size(uint64_t v) {
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static void put_uvarint(Buffer *b, uint64_t v) {
    while (v >= 0x80) {
        b->data[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->data[b->len++] = (uint8_t)v;
}

static void put_bytes(Buffer *b, const void *src, Py_ssize_t n) {
    if (n > 0) memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
}

/* A nullable bytes field: its view (obj NULL for None). */
typedef struct {
    Py_buffer view;
    int present;
} Field;

static int get_field(PyObject *obj, Field *f) {
    f->present = 0;
    if (obj == Py_None) return 0;
    if (PyObject_GetBuffer(obj, &f->view, PyBUF_SIMPLE) < 0) return -1;
    f->present = 1;
    return 0;
}

static void release_field(Field *f) {
    if (f->present) PyBuffer_Release(&f->view);
    f->present = 0;
}

static Py_ssize_t field_size(const Field *f) {
    return f->present ? uvarint_size(zigzag(f->view.len)) + f->view.len : 1;
}

static void put_field(Buffer *b, const Field *f) {
    if (!f->present) {
        put_uvarint(b, zigzag(-1));
        return;
    }
    put_uvarint(b, zigzag(f->view.len));
    put_bytes(b, f->view.buf, f->view.len);
}

static int get_int64(PyObject *record, const char *name, int64_t *out) {
    PyObject *value = PyObject_GetAttrString(record, name);
    if (value == NULL) return -1;
    long long v = PyLong_AsLongLong(value);
    Py_DECREF(value);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = (int64_t)v;
    return 0;
}

/* Encode one record; headers are a sequence of (str, bytes | None) pairs. */
static int encode_one(Buffer *b, PyObject *record) {
    int64_t attributes, timestamp_delta, offset_delta;
    if (get_int64(record, "attributes", &attributes) < 0) return -1;
    if (get_int64(record, "timestamp_delta", &timestamp_delta) < 0) return -1;
    if (get_int64(record, "offset_delta", &offset_delta) < 0) return -1;
    if (offset_delta < INT32_MIN || offset_delta > INT32_MAX || attributes < -128 || attributes > 127) {
        PyErr_SetString(PyExc_ValueError, "record field out of range");
        return -1;
    }
    int rc = -1;
    Field key = {0}, value = {0};
    PyObject *key_obj = NULL, *value_obj = NULL, *headers_obj = NULL, *headers = NULL;
    Field *header_values = NULL;
    PyObject **header_keys = NULL;
    Py_ssize_t header_count = 0, filled = 0;

    if ((key_obj = PyObject_GetAttrString(record, "key")) == NULL) goto done;
    if ((value_obj = PyObject_GetAttrString(record, "value")) == NULL) goto done;
    if ((headers_obj = PyObject_GetAttrString(record, "headers")) == NULL) goto done;
    if (get_field(key_obj, &key) < 0 || get_field(value_obj, &value) < 0) goto done;
    if ((headers = PySequence_Fast(headers_obj, "headers must be a sequence")) == NULL) goto done;
    header_count = PySequence_Fast_GET_SIZE(headers);
    Py_ssize_t body = 1 + uvarint_size(zigzag(timestamp_delta)) + uvarint_size(zigzag(offset_delta)) +
                      field_size(&key) + field_size(&value) + uvarint_size(zigzag(header_count));
    if (header_count > 0) {
        header_values = PyMem_Calloc((size_t)header_count, sizeof(Field));
        header_keys = PyMem_Calloc((size_t)header_count, sizeof(PyObject *));
        if (header_values == NULL || header_keys == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (; filled < header_count; filled++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(headers, filled);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "a header must be a (str, bytes | None) tuple");
            goto done;
        }
        header_keys[filled] = PyUnicode_AsUTF8String(PyTuple_GET_ITEM(pair, 0));
        if (header_keys[filled] == NULL) goto done;
        if (get_field(PyTuple_GET_ITEM(pair, 1), &header_values[filled]) < 0) {
            Py_CLEAR(header_keys[filled]);
            goto done;
        }
        Py_ssize_t key_len = PyBytes_GET_SIZE(header_keys[filled]);
        body += uvarint_size(zigzag(key_len)) + key_len + field_size(&header_values[filled]);
    }
    if (reserve(b, uvarint_size(zigzag(body)) + body) < 0) goto done;
    put_uvarint(b, zigzag(body));
    b->data[b->len++] = (uint8_t)(int8_t)attributes;
    put_uvarint(b, zigzag(timestamp_delta));
    put_uvarint(b, zigzag(offset_delta));
    put_field(b, &key);
    put_field(b, &value);
    put_uvarint(b, zigzag(header_count));
    for (Py_ssize_t i = 0; i < header_count; i++) {
        Py_ssize_t key_len = PyBytes_GET_SIZE(header_keys[i]);
        put_uvarint(b, zigzag(key_len));
        put_bytes(b, PyBytes_AS_STRING(header_keys[i]), key_len);
        put_field(b, &header_values[i]);
    }
    rc = 0;
done:
    for (Py_ssize_t i = 0; i < filled; i++) {
        Py_XDECREF(header_keys[i]);
        release_field(&header_values[i]);
    }
    PyMem_Free(header_values);
    PyMem_Free(header_keys);
    release_field(&key);
    release_field(&value);
    Py_XDECREF(headers);
    Py_XDECREF(headers_obj);
    Py_XDECREF(value_obj);
    Py_XDECREF(key_obj);
    return rc;
}

static PyObject *encode(PyObject *self, PyObject *records) {
    (void)self;
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (seq == NULL) return NULL;
    Buffer b = {NULL, 0, 0};
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (encode_one(&b, PySequence_Fast_GET_ITEM(seq, i)) < 0) {
            PyMem_Free(b.data);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    PyObject *out = PyBytes_FromStringAndSize((const char *)b.data, b.len);
    PyMem_Free(b.data);
    return out;
}

/* encode_values(values, headers) -> bytes: the records section of unkeyed records numbered from 0,
 * timestamp delta 0, with these values and each the same headers: byte-identical to encode() of
 * the corresponding Record objects (the producer's bulk path needs no Record per value). */
static PyObject *encode_values(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *values_obj, *headers_obj;
    if (!PyArg_ParseTuple(args, "OO", &values_obj, &headers_obj)) return NULL;
    PyObject *values = NULL, *headers = NULL, *out = NULL;
    Buffer tail = {NULL, 0, 0}, b = {NULL, 0, 0};
    if ((values = PySequence_Fast(values_obj, "values must be a sequence")) == NULL) goto done;
    if ((headers = PySequence_Fast(headers_obj, "headers must be a sequence")) == NULL) goto done;
    Py_ssize_t header_count = PySequence_Fast_GET_SIZE(headers);
    /* The header block every record ends with, encoded once. */
    if (reserve(&tail, uvarint_size(zigzag(header_count))) < 0) goto done;
    put_uvarint(&tail, zigzag(header_count));
    for (Py_ssize_t i = 0; i < header_count; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(headers, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "a header must be a (str, bytes | None) tuple");
            goto done;
        }
        PyObject *key = PyUnicode_AsUTF8String(PyTuple_GET_ITEM(pair, 0));
        if (key == NULL) goto done;
        Field value = {0};
        if (get_field(PyTuple_GET_ITEM(pair, 1), &value) < 0) {
            Py_DECREF(key);
            goto done;
        }
        Py_ssize_t key_len = PyBytes_GET_SIZE(key);
        int ok = reserve(&tail, uvarint_size(zigzag(key_len)) + key_len + field_size(&value)) == 0;
        if (ok) {
            put_uvarint(&tail, zigzag(key_len));
            put_bytes(&tail, PyBytes_AS_STRING(key), key_len);
            put_field(&tail, &value);
        }
        Py_DECREF(key);
        release_field(&value);
        if (!ok) goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(values);
    if (n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many records for one batch");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Field value = {0};
        if (get_field(PySequence_Fast_GET_ITEM(values, i), &value) < 0) goto done;
        /* attributes, timestamp delta 0, offset delta i, null key, value, headers */
        Py_ssize_t body = 1 + 1 + uvarint_size(zigzag(i)) + 1 + field_size(&value) + tail.len;
        if (reserve(&b, uvarint_size(zigzag(body)) + body) < 0) {
            release_field(&value);
            goto done;
        }
        put_uvarint(&b, zigzag(body));
        b.data[b.len++] = 0;
        put_uvarint(&b, zigzag(0));
        put_uvarint(&b, zigzag(i));
        put_uvarint(&b, zigzag(-1));
        put_field(&b, &value);
        put_bytes(&b, tail.data, tail.len);
        release_field(&value);
    }
    out = PyBytes_FromStringAndSize((const char *)b.data, b.len);
done:
    PyMem_Free(tail.data);
    PyMem_Free(b.data);
    Py_XDECREF(values);
    Py_XDECREF(headers);
    return out;
}

static PyMethodDef methods[] = {
    {"encode", encode, METH_O, "The records section of a v2 batch (see records.encode_record)."},
    {"encode_values", encode_values, METH_VARARGS, "The records section of unkeyed records with these values and headers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_encode", NULL, -1, methods};

PyMODINIT_FUNC PyInit__encode(void) { return PyModule_Create(&module); }

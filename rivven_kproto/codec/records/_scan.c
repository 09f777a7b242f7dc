/* Compiled twin of rivven_kproto/codec/records/scan.py: walk the records of one (decompressed)
 * v2 batch payload the way Kafka's DefaultRecord.readFrom does, without building objects.
 *
 * scan(payload, count, base_timestamp) -> (code, index, detail_a, detail_b, max_timestamp, null_keys)
 *
 * The codes and their meaning are defined (and documented) in scan.py; both implementations must
 * give identical answers for every input, which the unit tests check. The walk releases the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum {
    SCAN_OK = 0,
    SCAN_PREMATURE_EOF = 1,
    SCAN_RECORD_SIZE = 2,
    SCAN_STRUCTURE = 3,
    SCAN_HEADER_COUNT = 4,
    SCAN_HEADER_KEY = 5,
    SCAN_SIZE_MISMATCH = 6,
    SCAN_OFFSET_DELTA = 7,
    SCAN_REMAINING = 8,
    SCAN_BAD_VARINT = 9,
};

typedef struct {
    const uint8_t *buf;
    Py_ssize_t pos;
    Py_ssize_t end;
} Reader;

/* Java's ByteUtils.readVarint: 0 ok, -1 buffer underflow, -2 more than 5 bytes. */
static int read_varint(Reader *r, int32_t *out) {
    uint32_t value = 0;
    int shift = 0;
    for (;;) {
        if (r->pos >= r->end) return -1;
        uint32_t b = r->buf[r->pos++];
        if ((b & 0x80) == 0) {
            value |= b << shift;
            break;
        }
        value |= (b & 0x7f) << shift;
        shift += 7;
        if (shift > 28) return -2;
    }
    *out = (int32_t)((value >> 1) ^ (0u - (value & 1u)));
    return 0;
}

/* Java's ByteUtils.readVarlong: 0 ok, -1 buffer underflow, -2 more than 10 bytes. */
static int read_varlong(Reader *r, int64_t *out) {
    uint64_t value = 0;
    int shift = 0;
    for (;;) {
        if (r->pos >= r->end) return -1;
        uint64_t b = r->buf[r->pos++];
        if ((b & 0x80) == 0) {
            value |= b << shift;
            break;
        }
        value |= (b & 0x7f) << shift;
        shift += 7;
        if (shift > 63) return -2;
    }
    *out = (int64_t)((value >> 1) ^ (0ull - (value & 1ull)));
    return 0;
}

/* Skip a length-prefixed field whose length was read: negative means null (Kafka: size >= 0). */
static int skip(Reader *r, int32_t size) {
    if (size < 0) return 0;
    if (size > r->end - r->pos) return -1;
    r->pos += size;
    return 0;
}

typedef struct {
    int code;
    int64_t index;
    int64_t detail_a;
    int64_t detail_b;
    int64_t max_timestamp;
    int64_t null_keys;
} Result;

#define FAIL(c, a, b) do { res->code = (c); res->index = i; res->detail_a = (a); res->detail_b = (b); return; } while (0)
#define FIELD(call) do { int rc_ = (call); if (rc_ != 0) FAIL(SCAN_STRUCTURE, 0, 0); } while (0)

static void walk(const uint8_t *buf, Py_ssize_t len, int64_t count, int64_t base_timestamp, Result *res) {
    Reader r = {buf, 0, len};
    int64_t i = 0;
    res->code = SCAN_OK;
    res->max_timestamp = -1;
    res->null_keys = 0;
    for (i = 0; i < count; i++) {
        int32_t body_size;
        int rc = read_varint(&r, &body_size);
        if (rc == -1) FAIL(SCAN_PREMATURE_EOF, 0, 0);
        if (rc == -2) FAIL(SCAN_BAD_VARINT, 0, 0);
        if (r.end - r.pos < body_size) FAIL(SCAN_RECORD_SIZE, body_size, r.end - r.pos);
        Py_ssize_t start = r.pos;
        if (r.pos >= r.end) FAIL(SCAN_STRUCTURE, 0, 0);
        r.pos += 1; /* attributes */
        int64_t timestamp_delta;
        int32_t offset_delta, key_size, value_size, header_count;
        FIELD(read_varlong(&r, &timestamp_delta));
        FIELD(read_varint(&r, &offset_delta));
        FIELD(read_varint(&r, &key_size));
        FIELD(skip(&r, key_size));
        FIELD(read_varint(&r, &value_size));
        FIELD(skip(&r, value_size));
        FIELD(read_varint(&r, &header_count));
        if (header_count < 0 || header_count > r.end - r.pos) FAIL(SCAN_HEADER_COUNT, header_count, 0);
        for (int32_t h = 0; h < header_count; h++) {
            int32_t key_length, value_length;
            FIELD(read_varint(&r, &key_length));
            if (key_length < 0) FAIL(SCAN_HEADER_KEY, key_length, 0);
            FIELD(skip(&r, key_length));
            FIELD(read_varint(&r, &value_length));
            FIELD(skip(&r, value_length));
        }
        if (r.pos - start != body_size) FAIL(SCAN_SIZE_MISMATCH, body_size, r.pos - start);
        if (offset_delta != i) FAIL(SCAN_OFFSET_DELTA, offset_delta, 0);
        int64_t timestamp = (int64_t)((uint64_t)base_timestamp + (uint64_t)timestamp_delta);
        if (timestamp > res->max_timestamp) res->max_timestamp = timestamp;
        if (key_size < 0) res->null_keys += 1;
    }
    if (r.pos != r.end) FAIL(SCAN_REMAINING, r.end - r.pos, 0);
    res->index = count;
    res->detail_a = 0;
    res->detail_b = 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    long long count, base_timestamp;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*LL", &view, &count, &base_timestamp)) return NULL;
    Result res = {0, 0, 0, 0, -1, 0};
    Py_BEGIN_ALLOW_THREADS
    walk((const uint8_t *)view.buf, view.len, (int64_t)count, (int64_t)base_timestamp, &res);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("(iLLLLL)", res.code, (long long)res.index, (long long)res.detail_a,
                         (long long)res.detail_b, (long long)res.max_timestamp, (long long)res.null_keys);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Walk the records of a v2 batch payload (see scan.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }

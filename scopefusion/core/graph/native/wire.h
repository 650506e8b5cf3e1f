/* Reading protobuf's wire format: varints, tags, length-delimited payloads and stepping over
 * any field by its wire type, every read bounds-checked against the end of its buffer.  Shared by
 * the extensions that read serialized messages (``_scan``, ``_signatures``); every function is
 * static inline, so a module compiles in only what it uses.  Include after common.h.
 */
#ifndef SCOPEFUSION_NATIVE_WIRE_H
#define SCOPEFUSION_NATIVE_WIRE_H

#include "common.h"

/* A varint of at most ten bytes at *pos (< end); -1 when truncated or longer. */
static inline int read_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, uint64_t *out) {
    uint64_t value = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < 10; i++) {
        if (p >= end) {
            return -1;
        }
        unsigned char b = buf[p++];
        value |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pos = p;
            *out = value;
            return 0;
        }
    }
    return -1;
}

/* A field's tag: its number (>= 1) and wire type; -1 when it is none protobuf reads. */
static inline int read_tag(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, uint32_t *field, int *wire) {
    uint64_t tag;
    if (read_varint(buf, pos, end, &tag) < 0 || tag > UINT32_MAX || (tag >> 3) == 0) {
        return -1;
    }
    *field = (uint32_t)(tag >> 3);
    *wire = (int)(tag & 7);
    return 0;
}

/* The payload of a length-delimited field: [*start, *start + *size) inside [pos, end). */
static inline int read_length(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t *start,
                       Py_ssize_t *size) {
    uint64_t n;
    if (read_varint(buf, pos, end, &n) < 0 || n > (uint64_t)(end - *pos)) {
        return -1;
    }
    *start = *pos;
    *size = (Py_ssize_t)n;
    *pos += (Py_ssize_t)n;
    return 0;
}

static inline int skip_value(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, uint32_t field, int wire,
                      int depth);

/* Step over a group's fields up to its end tag (the same field number); groups nested deeper than
 * MAX_GROUP_DEPTH are left to protobuf (-1). */
#define MAX_GROUP_DEPTH 16
static inline int skip_group(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, uint32_t field, int depth) {
    if (depth > MAX_GROUP_DEPTH) {
        return -1;
    }
    for (;;) {
        uint32_t inner;
        int wire;
        if (read_tag(buf, pos, end, &inner, &wire) < 0) {
            return -1;
        }
        if (wire == 4) {
            return inner == field ? 0 : -1;
        }
        if (skip_value(buf, pos, end, inner, wire, depth) < 0) {
            return -1;
        }
    }
}

/* Step over the value of a field (number ``field``) of wire type ``wire``: -1 when it is cut
 * short, an end tag stands alone or the wire type is undefined (6, 7). */
static inline int skip_value(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, uint32_t field, int wire,
                      int depth) {
    uint64_t ignored;
    Py_ssize_t start, size;
    switch (wire) {
    case 0:
        return read_varint(buf, pos, end, &ignored);
    case 1:
        if (end - *pos < 8) {
            return -1;
        }
        *pos += 8;
        return 0;
    case 2:
        return read_length(buf, pos, end, &start, &size);
    case 3:
        return skip_group(buf, pos, end, field, depth + 1);
    case 5:
        if (end - *pos < 4) {
            return -1;
        }
        *pos += 4;
        return 0;
    default:
        return -1;
    }
}

#endif

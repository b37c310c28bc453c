/* Pipe protocol between the firmware/runtime process and the project's Python host
 * (verif/sw/protocol.py is the other side; keep the two in step).
 *
 * Every request is a fixed header (op, payload length, a, b) followed by the payload; every
 * request gets one reply (status, payload length, value) followed by its payload. A reply with
 * a non-zero status means the host ended the run (the engine failed: timeout, protocol error,
 * ...): the process prints the host's message and exits with status 3. */
#ifndef NVDLA_SW_CHANNEL_H
#define NVDLA_SW_CHANNEL_H
#include <stdint.h>
#include <stddef.h>

enum sw_op {
    SW_OP_HELLO = 1,      /* payload: text; a: protocol version */
    SW_OP_REG_WRITE = 2,  /* a: byte address (CSB word = a >> 2), b: 32-bit value */
    SW_OP_REG_READ = 3,   /* a: byte address; reply value: the register */
    SW_OP_MEM_WRITE = 4,  /* a: memory address, payload: bytes */
    SW_OP_MEM_READ = 5,   /* a: memory address, b: length; reply payload: bytes */
    SW_OP_WAIT_INTR = 6,  /* run the engine until dla_intr; a: interrupts so far, b: task id */
    SW_OP_NOTE = 7,       /* payload: what the process does now (task and operation) */
    SW_OP_LOG = 8,        /* a: level (2 warning, 3 error), payload: firmware message */
    SW_OP_DONE = 9,       /* a: task id, b: the firmware's return code (signed), payload: the
                             firmware call that failed (empty on success) */
};

#define SW_PROTOCOL_VERSION 1

/* Connect to the host (file descriptors from $NVDLA_SW_FDS = "READ,WRITE"); exits with one
 * clear line when the variable is missing. */
void sw_channel_open(void);
/* One request and its reply; returns the reply value, copies at most out_len payload bytes. */
uint64_t sw_call(uint32_t op, uint64_t a, uint64_t b, const void *payload, uint32_t len,
                 void *out, uint32_t out_len);
/* SW_OP_NOTE with printf formatting. */
void sw_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#endif

/* Client side of the pipe protocol (channel.h); the project's own code. */
#include "channel.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sw_req_hdr { uint32_t op; uint32_t len; uint64_t a; uint64_t b; };
struct sw_rep_hdr { int32_t status; uint32_t len; uint64_t value; };

static int rd_fd = -1, wr_fd = -1;

static void die(const char *what)
{
    fprintf(stderr, "nvdla-sw: %s\n", what);
    fflush(stderr);
    _exit(3);
}

static void write_all(const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t k = write(wr_fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            die("the host closed the channel (write)");
        p += k;
        n -= (size_t)k;
    }
}

static void read_all(void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t k = read(rd_fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            die("the host closed the channel (read)");
        p += k;
        n -= (size_t)k;
    }
}

void sw_channel_open(void)
{
    const char *fds = getenv("NVDLA_SW_FDS");
    if (!fds || sscanf(fds, "%d,%d", &rd_fd, &wr_fd) != 2)
        die("NVDLA_SW_FDS is not set: run this program through `python -m verif.sw run`");
    sw_call(SW_OP_HELLO, SW_PROTOCOL_VERSION, 0, "nvdla-sw", 8, NULL, 0);
}

uint64_t sw_call(uint32_t op, uint64_t a, uint64_t b, const void *payload, uint32_t len,
                 void *out, uint32_t out_len)
{
    struct sw_req_hdr h = { op, len, a, b };
    struct sw_rep_hdr r;
    if (rd_fd < 0)
        sw_channel_open();
    write_all(&h, sizeof h);
    if (len)
        write_all(payload, len);
    read_all(&r, sizeof r);
    if (r.status != 0) {
        /* the host ended the run: its payload says why (it has recorded the failure) */
        char msg[512];
        uint32_t n = r.len < sizeof msg - 1 ? r.len : sizeof msg - 1;
        read_all(msg, n);
        msg[n] = 0;
        fprintf(stderr, "nvdla-sw: the host ended the run: %s\n", msg);
        fflush(stderr);
        _exit(3);
    }
    uint32_t keep = r.len < out_len ? r.len : out_len;
    if (keep)
        read_all(out, keep);
    for (uint32_t left = r.len - keep; left;) {  /* discard what the caller did not ask for */
        uint8_t sink[256];
        uint32_t k = left < sizeof sink ? left : (uint32_t)sizeof sink;
        read_all(sink, k);
        left -= k;
    }
    return r.value;
}

void sw_note(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf)
        n = sizeof buf - 1;
    sw_call(SW_OP_NOTE, 0, 0, buf, (uint32_t)n, NULL, 0);
}

/* The project's kernel-mode glue around NVIDIA's unmodified firmware
 * (../shared/nvdla/sw/kmd/firmware): the OS hooks the firmware calls (kmd/include/
 * nvdla_interface.h) and the submit path, modelled on NVIDIA's Linux port
 * (kmd/port/linux/nvdla_core_callbacks.c):
 *   - dla_reg_write/dla_reg_read: one CSB transaction each on the host's engine (byte address,
 *     as the firmware's opendla*.h offsets; the host turns it into the CSB word address >> 2);
 *   - dla_data_read/dla_data_write: the engine's memory at the buffer's address + offset (the
 *     Linux port's vmap of the DMA-buf: the address list entry's own offset is not added);
 *   - dla_get_dma_address: DESTINATION_PROCESSOR gives the address list index,
 *     DESTINATION_DMA the buffer's engine address + the entry's offset (dla_read_*_address);
 *   - interrupts: the host runs the engine until dla_intr, then the firmware's ISR and event
 *     loop run as nvdla_task_submit does (dla_execute_task; wait; dla_isr_handler;
 *     dla_process_events until task_complete; dla_clear_task). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nvdla_interface.h>
#include <dla_sched.h>

#include "channel.h"
#include "sw_device.h"

/* nvdla_core_callbacks.c: nvdla_config_small ("nvidia,nvdla_2") and nvdla_config_os_initial;
 * NVDLA_SW_LARGE: nvdla_config_large of NVIDIA's later Linux port ("nvidia,nv_large": atom 32, no
 * BDMA, no RUBIK, no weight compression) with nv_small's (v2) register map */
#if defined(NVDLA_SW_LARGE)
static struct dla_config sw_config = { .atom_size = 32, .bdma_enable = false,
                                       .rubik_enable = false, .weight_compress_support = false };
#elif defined(DLA_SMALL_CONFIG)
static struct dla_config sw_config = { .atom_size = 8, .bdma_enable = false,
                                       .rubik_enable = false, .weight_compress_support = false };
#else
static struct dla_config sw_config = { .atom_size = 32, .bdma_enable = true,
                                       .rubik_enable = true, .weight_compress_support = true };
#endif

struct sw_task {
    uint64_t id;
    uint32_t num_addresses;
    struct sw_addr *list;
};

static void *engine_context;
static int driver_context_token;          /* non-NULL driver context for the firmware */
static int verbose = -1;

static int is_verbose(void)
{
    if (verbose < 0) {
        const char *v = getenv("NVDLA_SW_DEBUG");
        verbose = v && *v && strcmp(v, "0") != 0;
    }
    return verbose;
}

/* ---- the firmware's OS hooks ---------------------------------------------------------- */

/* dla_debug and dla_info: the firmware's chatter, on stderr only when verbose */
#define VERBOSE_HOOK(name)                \
    void name(const char *str, ...)       \
    {                                     \
        if (!is_verbose())                \
            return;                       \
        va_list ap;                       \
        va_start(ap, str);                \
        vfprintf(stderr, str, ap);        \
        va_end(ap);                       \
    }

VERBOSE_HOOK(dla_debug)
VERBOSE_HOOK(dla_info)

static void forward(uint32_t level, const char *str, va_list ap)
{
    char buf[512];
    int n = vsnprintf(buf, sizeof buf, str, ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf)
        n = sizeof buf - 1;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = 0;
    fprintf(stderr, "firmware %s: %s\n", level == 3 ? "error" : "warning", buf);
    sw_call(SW_OP_LOG, level, 0, buf, (uint32_t)n, NULL, 0);
}

void dla_warn(const char *str, ...)
{
    va_list ap;
    va_start(ap, str);
    forward(2, str, ap);
    va_end(ap);
}

void dla_error(const char *str, ...)
{
    va_list ap;
    va_start(ap, str);
    forward(3, str, ap);
    va_end(ap);
}

void *dla_memset(void *src, int ch, uint64_t len)
{
    return memset(src, ch, len);
}

void *dla_memcpy(void *dest, const void *src, uint64_t len)
{
    return memcpy(dest, src, len);
}

int64_t dla_get_time_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void dla_reg_write(void *driver_context, uint32_t addr, uint32_t reg)
{
    if (!driver_context)
        return;
    sw_call(SW_OP_REG_WRITE, addr, reg, NULL, 0, NULL, 0);
}

uint32_t dla_reg_read(void *driver_context, uint32_t addr)
{
    if (!driver_context)
        return 0;
    return (uint32_t)sw_call(SW_OP_REG_READ, addr, 0, NULL, 0, NULL, 0);
}

int32_t dla_get_dma_address(void *driver_context, void *task_data, int16_t index, void *dst_ptr,
                            uint32_t destination)
{
    struct sw_task *task = task_data;
    (void)driver_context;
    if (index < 0 || (uint32_t)index >= task->num_addresses || !task->list[index].mem)
        return -EINVAL;
    if (destination == DESTINATION_PROCESSOR) {
        *(uint64_t *)dst_ptr = (uint64_t)index;
    } else if (destination == DESTINATION_DMA) {
        *(uint64_t *)dst_ptr = task->list[index].mem->dma + task->list[index].offset;
    } else {
        return -EINVAL;
    }
    return 0;
}

static struct sw_mem *data_buffer(struct sw_task *task, uint64_t index, uint32_t size,
                                  uint64_t offset, const char *what)
{
    struct sw_mem *m;
    if (index >= task->num_addresses || !(m = task->list[index].mem)) {
        fprintf(stderr, "nvdla-sw: %s: address list index %llu out of range (%u entries)\n",
                what, (unsigned long long)index, task->num_addresses);
        return NULL;
    }
    if (offset + size > m->size) {
        fprintf(stderr, "nvdla-sw: %s: %u bytes at offset %llu beyond the %u-byte buffer of "
                "address list entry %llu\n", what, size, (unsigned long long)offset, m->size,
                (unsigned long long)index);
        return NULL;
    }
    return m;
}

int32_t dla_data_read(void *driver_context, void *task_data, uint64_t src, void *dst,
                      uint32_t size, uint64_t offset)
{
    (void)driver_context;
    struct sw_mem *m = data_buffer(task_data, src, size, offset, "dla_data_read");
    if (!m)
        return -EFAULT;
    sw_call(SW_OP_MEM_READ, m->dma + offset, size, NULL, 0, dst, size);
    return 0;
}

int32_t dla_data_write(void *driver_context, void *task_data, void *src, uint64_t dst,
                       uint32_t size, uint64_t offset)
{
    (void)driver_context;
    struct sw_mem *m = data_buffer(task_data, dst, size, offset, "dla_data_write");
    if (!m)
        return -EFAULT;
    sw_call(SW_OP_MEM_WRITE, m->dma + offset, 0, src, size, NULL, 0);
    return 0;
}

/* ---- device ---------------------------------------------------------------------------- */

void sw_device_open(void)
{
    sw_channel_open();
    dla_register_driver(&engine_context, &driver_context_token);
    dla_clear_task(engine_context);
}

static int cmp_mem(const void *a, const void *b)
{
    const struct sw_mem *x = *(struct sw_mem *const *)a, *y = *(struct sw_mem *const *)b;
    return x < y ? -1 : x > y;
}

/* The distinct buffers of a task's address list (sorted pointers); returns their count. */
static uint32_t task_buffers(struct sw_task *task, struct sw_mem **out)
{
    uint32_t n = 0, k = 0;
    for (uint32_t i = 0; i < task->num_addresses; i++)
        if (task->list[i].mem)
            out[n++] = task->list[i].mem;
    qsort(out, n, sizeof *out, cmp_mem);
    for (uint32_t i = 0; i < n; i++)
        if (!k || out[k - 1] != out[i])
            out[k++] = out[i];
    return k;
}

int32_t sw_device_submit(uint64_t task_id, uint32_t num_addresses, struct sw_addr *list)
{
    struct sw_task task = { task_id, num_addresses, list };
    struct sw_mem **bufs = calloc(num_addresses ? num_addresses : 1, sizeof *bufs);
    uint32_t nbuf, events = 0, complete = 0;
    char phase[96] = "";
    uint64_t bytes = 0;
    int32_t err;

    if (!bufs)
        return -ENOMEM;
    nbuf = task_buffers(&task, bufs);
    for (uint32_t i = 0; i < nbuf; i++)
        bytes += bufs[i]->size;
    sw_note("task %llu: copying its %u buffers (%llu bytes) to the engine's memory",
            (unsigned long long)task_id, nbuf, (unsigned long long)bytes);
    for (uint32_t i = 0; i < nbuf; i++)
        sw_call(SW_OP_MEM_WRITE, bufs[i]->dma, 0, bufs[i]->cpu, bufs[i]->size, NULL, 0);

    sw_note("task %llu: dla_execute_task (reading the network, programming the first operations)",
            (unsigned long long)task_id);
    err = dla_execute_task(engine_context, &task, &sw_config);
    if (err) {
        snprintf(phase, sizeof phase, "dla_execute_task");
    } else {
        for (;;) {
            sw_call(SW_OP_WAIT_INTR, events, task_id, NULL, 0, NULL, 0);
            events++;
            sw_note("task %llu: interrupt %u: dla_isr_handler, dla_process_events",
                    (unsigned long long)task_id, events);
            dla_isr_handler(engine_context);
            err = dla_process_events(engine_context, &complete);
            if (err || complete)
                break;
        }
        if (err)
            snprintf(phase, sizeof phase, "dla_process_events after interrupt %u", events);
    }
    dla_clear_task(engine_context);

    sw_note("task %llu: copying its buffers back from the engine's memory",
            (unsigned long long)task_id);
    for (uint32_t i = 0; i < nbuf; i++)
        sw_call(SW_OP_MEM_READ, bufs[i]->dma, bufs[i]->size, NULL, 0, bufs[i]->cpu, bufs[i]->size);
    free(bufs);
    /* payload: the firmware call that failed (empty on success) */
    sw_call(SW_OP_DONE, task_id, (uint64_t)(int64_t)err, phase, (uint32_t)strlen(phase), NULL, 0);
    return err;
}

/* The project's implementation of the UMD port API (../shared/nvdla/sw/umd/core/include/
 * nvdla_inf.h: NvDlaInitialize, Destroy, Open, Close, AllocMem, FreeMem, Submit), replacing
 * NVIDIA's umd/port/linux/nvdla.c (ioctls to the Linux driver). Buffers live in this process;
 * each gets an address in the engine's memory from a bump allocator over
 * [$NVDLA_SW_DMA_BASE, $NVDLA_SW_DMA_LIMIT). Submit hands the task to the firmware glue
 * (kmd_glue.c), which copies the task's buffers to the engine's memory before the firmware runs
 * and back after it finished (what the DMA-buf begin/end CPU access brackets guarantee on Linux). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaerror.h"
#include "dlatypes.h"
#include "nvdla_inf.h"

#include "sw_device.h"

#define SW_BUFFER_ALIGN 4096u   /* page-aligned, as the Linux driver's GEM buffers */

static uint64_t next_dma, dma_limit;
static int device_open;

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    return s ? strtoull(s, NULL, 0) : dflt;
}

NvDlaError NvDlaInitialize(void **session_handle)
{
    if (!session_handle)
        return NvDlaError_BadParameter;
    *session_handle = NULL;
    return NvDlaSuccess;
}

void NvDlaDestroy(void *session_handle)
{
    (void)session_handle;
}

NvDlaError NvDlaOpen(void *session_handle, NvU32 instance, void **device_handle)
{
    (void)session_handle;
    if (instance > 0 || !device_handle)   /* one device, as umd/port/linux/nvdla.c */
        return NvDlaError_BadParameter;
    if (!device_open) {
        next_dma = env_u64("NVDLA_SW_DMA_BASE", 0x80000000ull);
        dma_limit = env_u64("NVDLA_SW_DMA_LIMIT", 0x100000000ull);
        sw_device_open();
        device_open = 1;
    }
    *device_handle = (void *)&device_open;
    return NvDlaSuccess;
}

void NvDlaClose(void *device_handle)
{
    (void)device_handle;
}

NvDlaError NvDlaAllocMem(void *session_handle, void *device_handle, void **mem_handle,
                         void **pData, NvU32 size, NvDlaHeap heap)
{
    (void)session_handle; (void)device_handle; (void)heap;
    uint64_t span = ((uint64_t)size + SW_BUFFER_ALIGN - 1) / SW_BUFFER_ALIGN * SW_BUFFER_ALIGN;
    if (!mem_handle || !pData)
        return NvDlaError_BadParameter;
    if (span == 0)
        span = SW_BUFFER_ALIGN;
    if (next_dma + span > dma_limit) {
        fprintf(stderr, "nvdla-sw: NvDlaAllocMem(%u bytes): the engine's memory window "
                "ends at %#llx\n", size, (unsigned long long)dma_limit);
        return NvDlaError_InsufficientMemory;
    }
    struct sw_mem *m = calloc(1, sizeof *m);
    void *cpu = NULL;
    if (!m || posix_memalign(&cpu, SW_BUFFER_ALIGN, span)) {
        free(m);
        return NvDlaError_InsufficientMemory;
    }
    memset(cpu, 0, span);
    m->cpu = cpu;
    m->size = size;
    m->dma = next_dma;
    next_dma += span;
    *mem_handle = m;
    *pData = cpu;
    return NvDlaSuccess;
}

NvDlaError NvDlaFreeMem(void *session_handle, void *device_handle, void *mem_handle,
                        void *pData, NvU32 size)
{
    (void)session_handle; (void)device_handle; (void)pData; (void)size;
    struct sw_mem *m = mem_handle;
    if (!m)
        return NvDlaError_BadParameter;
    free(m->cpu);      /* its engine addresses are not reused: a stale DMA shows as garbage */
    free(m);
    return NvDlaSuccess;
}

NvDlaError NvDlaSubmit(void *session_handle, void *device_handle, NvDlaTask *tasks, NvU32 num_tasks)
{
    (void)session_handle; (void)device_handle;
    for (NvU32 t = 0; t < num_tasks; t++) {
        NvDlaTask *task = &tasks[t];
        struct sw_addr *list;
        if (task->num_addresses > NVDLA_MAX_BUFFERS_PER_TASK)
            return NvDlaError_BadParameter;
        list = calloc(task->num_addresses ? task->num_addresses : 1, sizeof *list);
        if (!list)
            return NvDlaError_InsufficientMemory;
        for (NvU32 i = 0; i < task->num_addresses; i++) {
            list[i].mem = task->address_list[i].handle;
            list[i].offset = task->address_list[i].offset;
        }
        int32_t err = sw_device_submit(task->task_id, task->num_addresses, list);
        free(list);
        if (err) {
            fprintf(stderr, "nvdla-sw: task %llu: the firmware returned %d\n",
                    (unsigned long long)task->task_id, err);
            return NvDlaError_IoctlFailed;   /* what the Linux port returns for a failed submit */
        }
    }
    return NvDlaSuccess;
}

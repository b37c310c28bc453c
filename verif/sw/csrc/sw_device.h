/* The project's simulated NVDLA device, shared by its UMD port layer (umd_port.c) and its
 * kernel-mode glue around NVIDIA's firmware (kmd_glue.c). */
#ifndef NVDLA_SW_DEVICE_H
#define NVDLA_SW_DEVICE_H
#include <stdint.h>

/* One buffer: its bytes in this process (what the runtime reads and writes through the pointer
 * NvDlaAllocMem returns) and its address in the engine's memory (what the hardware sees). */
struct sw_mem {
    uint64_t dma;
    uint8_t *cpu;
    uint32_t size;
};

/* One entry of a task's address list (nvdla_inf.h NvDlaMemDesc: a buffer and an offset). */
struct sw_addr {
    struct sw_mem *mem;
    uint32_t offset;
};

/* Start the firmware once (dla_register_driver, dla_clear_task: nvdla_probe in
 * kmd/port/linux/nvdla_core_callbacks.c). */
void sw_device_open(void);
/* Run one DLA task to completion (nvdla_task_submit in nvdla_core_callbacks.c); returns the
 * firmware's return code. */
int32_t sw_device_submit(uint64_t task_id, uint32_t num_addresses, struct sw_addr *list);
#endif

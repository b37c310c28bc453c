/* The project's stand-in for <linux/types.h>, so that NVIDIA's kernel-mode firmware
 * (../shared/nvdla/sw/kmd/firmware, included through kmd/include/nvdla_interface.h) compiles
 * as an ordinary userspace library. Fact used (../shared/nvdla/sw/README.md): the firmware needs
 * only the fixed-width integer types, bool, and the __packed / __aligned(x) attributes. */
#ifndef NVDLA_SW_LINUX_TYPES_H
#define NVDLA_SW_LINUX_TYPES_H
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#define __packed __attribute__((packed))
#define __aligned(x) __attribute__((aligned(x)))
#endif

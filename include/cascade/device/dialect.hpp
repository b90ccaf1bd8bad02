// The kernel dialect of single-source kernels (CASCADE_KERNEL, kernel.hpp): the names a kernel
// body uses for its work-item ids, its barrier and its scratch memory. The same names mean the
// same thing on every device: here (the CPU loop) they read the work item's context; in the
// OpenCL C and CUDA sources generated from the body they map to get_global_id(0) /
// blockIdx.x * blockDim.x + threadIdx.x and so on (the preludes in src/device/kernel.cpp).
//
//   kernel_global_id_x/y/z   kernel_local_id_x/y/z    kernel_group_id_x/y/z
//   kernel_global_size_x/y/z kernel_local_size_x/y/z  kernel_num_groups_x/y/z   (all int)
//   kernel_barrier()                    all work items of the group reach it before any goes on
//   kernel_dynamic_local(T)             the launch's scratch memory (Launch::scratch_bytes),
//                                       shared by a work group, as a kernel_local T*
//   kernel_global, kernel_local         address-space qualifiers of pointer parameters and
//                                       scratch pointers (empty here and in CUDA)
#pragma once

#include <cstddef>

namespace cascade::device::detail {

// What a work item sees of itself (one per thread running kernel bodies; the CPU loop sets
// it before each item).
struct ItemContext {
    int global_id[3];
    int local_id[3];
    int group_id[3];
    int global_size[3];
    int local_size[3];
    int num_groups[3];
    void* scratch;
};

ItemContext& item_context() noexcept;
// kernel_barrier() on the CPU: switches to the next work item of the group.
void item_barrier();

}  // namespace cascade::device::detail

#define CASCADE_ITEM_ (::cascade::device::detail::item_context())
#define kernel_global_id_x (CASCADE_ITEM_.global_id[0])
#define kernel_global_id_y (CASCADE_ITEM_.global_id[1])
#define kernel_global_id_z (CASCADE_ITEM_.global_id[2])
#define kernel_local_id_x (CASCADE_ITEM_.local_id[0])
#define kernel_local_id_y (CASCADE_ITEM_.local_id[1])
#define kernel_local_id_z (CASCADE_ITEM_.local_id[2])
#define kernel_group_id_x (CASCADE_ITEM_.group_id[0])
#define kernel_group_id_y (CASCADE_ITEM_.group_id[1])
#define kernel_group_id_z (CASCADE_ITEM_.group_id[2])
#define kernel_global_size_x (CASCADE_ITEM_.global_size[0])
#define kernel_global_size_y (CASCADE_ITEM_.global_size[1])
#define kernel_global_size_z (CASCADE_ITEM_.global_size[2])
#define kernel_local_size_x (CASCADE_ITEM_.local_size[0])
#define kernel_local_size_y (CASCADE_ITEM_.local_size[1])
#define kernel_local_size_z (CASCADE_ITEM_.local_size[2])
#define kernel_num_groups_x (CASCADE_ITEM_.num_groups[0])
#define kernel_num_groups_y (CASCADE_ITEM_.num_groups[1])
#define kernel_num_groups_z (CASCADE_ITEM_.num_groups[2])
#define kernel_barrier() ::cascade::device::detail::item_barrier()
#define kernel_dynamic_local(T) (static_cast<T*>(CASCADE_ITEM_.scratch))
#define kernel_global
#define kernel_local

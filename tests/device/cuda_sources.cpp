// Writes the CUDA C++ that the single-source kernels of the tests expand to, one file per
// kernel in the directory given, so that nvcc can compile them on a machine without a GPU.
#include <cstdio>
#include <fstream>
#include <string>

#include "cascade/device/kernel.hpp"

CASCADE_KERNEL(saxpy, (float a, kernel_global const float* x, kernel_global float* y, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] = a * x[i] + y[i];
});
CASCADE_KERNEL(group_sum, (kernel_global const double* x, kernel_global double* sums), {
    kernel_local double* s = kernel_dynamic_local(double);
    int l = kernel_local_id_x;
    s[l] = x[kernel_global_id_x];
    kernel_barrier();
    for (int h = kernel_local_size_x / 2; h > 0; h /= 2) {
        if (l < h) s[l] += s[l + h];
        kernel_barrier();
    }
    if (l == 0) sums[kernel_group_id_x] = s[0];
});
CASCADE_KERNEL(stencil2d, (kernel_global const double* in, kernel_global double* out, int nx), {
    int x = kernel_global_id_x, y = kernel_global_id_y;
    out[y * nx + x] = in[y * nx + x] * kernel_num_groups_y + kernel_group_id_y;
});

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    for (const cascade::Kernel* k : {&saxpy, &group_sum, &stencil2d}) {
        std::ofstream f(std::string(argv[1]) + "/" + k->name() + ".cu");
        f << k->cuda_text();
    }
    return 0;
}

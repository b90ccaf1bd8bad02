// Jacobi3D proxy: a 7-point Jacobi iteration on a 3D domain split into blocks, run two ways in
// one program, on the devices of the device layer (cpu, sim, OpenCL, CUDA):
//
//   cascade  each block is a mobile object holding its field, its incoming halos and its
//            outgoing faces as Data<double>. A block's update runs as two device kernels as
//            soon as its six halos for that iteration arrived: the boundary kernel (the six
//            boundary layers, which write the outgoing faces), then the interior kernel. When
//            the boundary kernel ends, the faces it wrote are read on the host (request(read))
//            and sent to the neighbours as large active messages while the interior kernel
//            runs, straight from the face's host copy into the host copy of the neighbour's
//            halo Data (--halos object: as object requests carrying the bytes, written into
//            the halo by the neighbour's handler); on arrival each halo starts its copy to the
//            device at once (push_range), and the neighbour's handler counts the arrival and
//            launches its kernels when it has everything. Nothing waits for an iteration to
//            end everywhere: blocks, transfers and messages overlap (with --od 2 or 4, several
//            blocks per device pipeline their transfers and kernels). --kernels whole runs
//            the update as the one kernel the classic version launches.
//   classic  one block per device; each iteration: read the faces to the host, exchange them
//            with MPI_Isend / MPI_Irecv / MPI_Waitall, then launch the whole update
//            (jacobi_update) on every device of the rank and wait for it (submit + wait).
//
// The answer is a checksum of the final field that does not depend on the decomposition
// (every point's value is computed in the same order of operations; the checksum is an exact
// integer sum of fixed-point values); small domains are also checked against a serial run.
//
//   mpiexec -n 4 jacobi3d --n 64 --iters 20 --device sim --od 2
#include <CLI/CLI.hpp>
#include <cascade/cascade.hpp>
#include <cascade/device/devices.hpp>
#include <cascade/objects/device.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "../common/record.hpp"

// The update of one block: v = mean of the six neighbours of u, the neighbours outside the
// block taken from the incoming halos h*; the block's boundary values of v are also written
// to the outgoing faces o* (what the neighbours need next). Faces: x low, x high, y low, ...;
// an x face is indexed j + ly k, a y face i + lx k, a z face i + lx j.
CASCADE_KERNEL(jacobi_update,
               (kernel_global const double* u, kernel_global const double* hxl,
                kernel_global const double* hxh, kernel_global const double* hyl,
                kernel_global const double* hyh, kernel_global const double* hzl,
                kernel_global const double* hzh, kernel_global double* v, kernel_global double* oxl,
                kernel_global double* oxh, kernel_global double* oyl, kernel_global double* oyh,
                kernel_global double* ozl, kernel_global double* ozh, int lx, int ly, int lz),
               {
                   int id = kernel_global_id_x;
                   if (id < lx * ly * lz) {
                       int i = id % lx;
                       int j = (id / lx) % ly;
                       int k = id / (lx * ly);
                       int fx = j + ly * k;
                       int fy = i + lx * k;
                       int fz = i + lx * j;
                       double s = i > 0 ? u[id - 1] : hxl[fx];
                       s += i < lx - 1 ? u[id + 1] : hxh[fx];
                       s += j > 0 ? u[id - lx] : hyl[fy];
                       s += j < ly - 1 ? u[id + lx] : hyh[fy];
                       s += k > 0 ? u[id - lx * ly] : hzl[fz];
                       s += k < lz - 1 ? u[id + lx * ly] : hzh[fz];
                       double r = s / 6.0;
                       v[id] = r;
                       if (i == 0) oxl[fx] = r;
                       if (i == lx - 1) oxh[fx] = r;
                       if (j == 0) oyl[fy] = r;
                       if (j == ly - 1) oyh[fy] = r;
                       if (k == 0) ozl[fz] = r;
                       if (k == lz - 1) ozh[fz] = r;
                   }
               });

// The same update split in two, so that the faces can travel while most of the block computes
// (the Cascade version): `jacobi_boundary` updates the block's six boundary layers, one work
// item per point of each face (a point on an edge or a corner is computed by each of its faces'
// items, in the same order of operations, so they write the same value), and writes the
// outgoing faces; `jacobi_interior` updates the points off the boundary, which need no halo.
// Together they compute what `jacobi_update` does, bit for bit.
CASCADE_KERNEL(jacobi_boundary,
               (kernel_global const double* u, kernel_global const double* hxl,
                kernel_global const double* hxh, kernel_global const double* hyl,
                kernel_global const double* hyh, kernel_global const double* hzl,
                kernel_global const double* hzh, kernel_global double* v, kernel_global double* oxl,
                kernel_global double* oxh, kernel_global double* oyl, kernel_global double* oyh,
                kernel_global double* ozl, kernel_global double* ozh, int lx, int ly, int lz),
               {
                   int id = kernel_global_id_x;
                   int nfx = ly * lz;
                   int nfy = lx * lz;
                   int nfz = lx * ly;
                   if (id < 2 * (nfx + nfy + nfz)) {
                       int f = 0;
                       int r = id;
                       int i = 0;
                       int j = 0;
                       int k = 0;
                       if (r < 2 * nfx) {
                           f = r / nfx;
                           r = r % nfx;
                           i = f == 1 ? lx - 1 : 0;
                           j = r % ly;
                           k = r / ly;
                       } else if (r < 2 * (nfx + nfy)) {
                           r -= 2 * nfx;
                           f = 2 + r / nfy;
                           r = r % nfy;
                           i = r % lx;
                           j = f == 3 ? ly - 1 : 0;
                           k = r / lx;
                       } else {
                           r -= 2 * (nfx + nfy);
                           f = 4 + r / nfz;
                           r = r % nfz;
                           i = r % lx;
                           j = r / lx;
                           k = f == 5 ? lz - 1 : 0;
                       }
                       int c = i + lx * (j + ly * k);
                       int fx = j + ly * k;
                       int fy = i + lx * k;
                       int fz = i + lx * j;
                       double s = i > 0 ? u[c - 1] : hxl[fx];
                       s += i < lx - 1 ? u[c + 1] : hxh[fx];
                       s += j > 0 ? u[c - lx] : hyl[fy];
                       s += j < ly - 1 ? u[c + lx] : hyh[fy];
                       s += k > 0 ? u[c - lx * ly] : hzl[fz];
                       s += k < lz - 1 ? u[c + lx * ly] : hzh[fz];
                       double q = s / 6.0;
                       v[c] = q;
                       if (f == 0) oxl[r] = q;
                       if (f == 1) oxh[r] = q;
                       if (f == 2) oyl[r] = q;
                       if (f == 3) oyh[r] = q;
                       if (f == 4) ozl[r] = q;
                       if (f == 5) ozh[r] = q;
                   }
               });

// The interior points of the z layers k0 + 1 .. k0 + nk (a piece of the interior: several
// pieces let another block's boundary kernel run between them).
CASCADE_KERNEL(jacobi_interior,
               (kernel_global const double* u, kernel_global double* v, int lx, int ly, int k0,
                int nk),
               {
                   int id = kernel_global_id_x;
                   int mx = lx - 2;
                   int my = ly - 2;
                   if (id < mx * my * nk) {
                       int i = id % mx + 1;
                       int j = (id / mx) % my + 1;
                       int k = id / (mx * my) + 1 + k0;
                       int c = i + lx * (j + ly * k);
                       double s = u[c - 1];
                       s += u[c + 1];
                       s += u[c - lx];
                       s += u[c + lx];
                       s += u[c - lx * ly];
                       s += u[c + lx * ly];
                       v[c] = s / 6.0;
                   }
               });

// Brings data to a device before the timed part (the kernel does nothing).
CASCADE_KERNEL(jacobi_touch, (kernel_global double* u, int n), {
    if (kernel_global_id_x > n) u[0] = 0;
});

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kBoundaryXLow = 1.0;  // the domain's x = -1 plane; every other side is 0

// Initial value of global point (x, y, z).
double initial(long x, long y, long z) {
    return static_cast<double>((x * 7 + y * 13 + z * 29) % 17) / 16.0;
}

// Exact, order-independent checksum: the sum modulo 2^64 of the values in fixed point.
std::uint64_t fixed(double v) {
    return static_cast<std::uint64_t>(std::llround(v * 1099511627776.0));  // 2^40
}

// The global domain cut into b[0] x b[1] x b[2] blocks; block id = ix + bx (iy + by iz).
struct Geometry {
    std::array<long, 3> n{};
    std::array<int, 3> b{};
    int blocks = 0;

    Geometry(std::array<long, 3> size, int nblocks) : n(size), blocks(nblocks) {
        // The factorization with the least face area per block.
        double best = 1e300;
        for (int bx = 1; bx <= nblocks; ++bx) {
            if (nblocks % bx) continue;
            for (int by = 1; by <= nblocks / bx; ++by) {
                if ((nblocks / bx) % by) continue;
                const int bz = nblocks / bx / by;
                if (bx > n[0] || by > n[1] || bz > n[2]) continue;
                const double lx = double(n[0]) / bx, ly = double(n[1]) / by, lz = double(n[2]) / bz;
                const double area = lx * ly + ly * lz + lx * lz;
                if (area < best - 1e-9) {
                    best = area;
                    b = {bx, by, bz};
                }
            }
        }
        if (best == 1e300)
            throw std::invalid_argument("jacobi3d: the domain is too small for " +
                                        std::to_string(nblocks) + " blocks");
    }
    std::array<int, 3> coords(int id) const {
        return {id % b[0], (id / b[0]) % b[1], id / (b[0] * b[1])};
    }
    long start(int d, int i) const { return n[d] * i / b[d]; }
    long extent(int d, int i) const { return start(d, i + 1) - start(d, i); }
    // The block across face f (0: x low, 1: x high, 2: y low, ...), or -1 at the boundary.
    int neighbour(int id, int f) const {
        auto c = coords(id);
        const int d = f / 2;
        c[d] += (f % 2) ? 1 : -1;
        if (c[d] < 0 || c[d] >= b[d]) return -1;
        return c[0] + b[0] * (c[1] + b[1] * c[2]);
    }
};

// One block: its field (two copies, read one, write the other), incoming halos and outgoing
// faces (two of each, by iteration parity), and its progress.
struct Block {
    int id = -1, device = 0;
    int lx = 0, ly = 0, lz = 0;
    long x0 = 0, y0 = 0, z0 = 0;
    std::array<int, 6> nb{};
    cascade::Data<double> field[2];
    cascade::Data<double> in[2][6], out[2][6];
    // Progress (Cascade version): the next iteration to launch, and per parity the arrivals
    // that iteration still needs (its halos, and the launch of the previous iteration).
    int next = 0, expected = 1;
    int arrived[2] = {0, 0};
    cascade::DeviceTask last;

    // Its geometry, its Data (each one's freshest copy travels; it arrives on the Devices of
    // the destination rank, cascade::set_object_devices) and its progress. `last` stays: the
    // migration waited for it.
    template <class Archive>
    void serialize(Archive& ar) {
        ar(id, device, lx, ly, lz, x0, y0, z0, nb, field[0], field[1]);
        for (int p = 0; p < 2; ++p)
            for (int f = 0; f < 6; ++f)
                ar(in[p][f], out[p][f]);
        ar(next, expected, arrived[0], arrived[1]);
    }

    long face_size(int f) const {
        return f < 2 ? long(ly) * lz : f < 4 ? long(lx) * lz : long(lx) * ly;
    }
};

Block make_block(cascade::Devices& devs, const Geometry& g, int id, int device) {
    Block b;
    b.id = id;
    b.device = device;
    const auto c = g.coords(id);
    b.lx = static_cast<int>(g.extent(0, c[0]));
    b.ly = static_cast<int>(g.extent(1, c[1]));
    b.lz = static_cast<int>(g.extent(2, c[2]));
    b.x0 = g.start(0, c[0]);
    b.y0 = g.start(1, c[1]);
    b.z0 = g.start(2, c[2]);
    for (int f = 0; f < 6; ++f)
        b.nb[f] = g.neighbour(id, f);
    b.expected = 1;
    for (int f = 0; f < 6; ++f)
        b.expected += b.nb[f] >= 0;
    const std::size_t pts = std::size_t(b.lx) * b.ly * b.lz;
    const std::string name = "block" + std::to_string(id);
    for (int p = 0; p < 2; ++p) {
        b.field[p] = cascade::Data<double>(devs, pts, name + (p ? ".v" : ".u"));
        for (int f = 0; f < 6; ++f) {
            b.in[p][f] = cascade::Data<double>(devs, std::size_t(b.face_size(f)),
                                               name + ".in" + std::to_string(p * 6 + f));
            b.out[p][f] = cascade::Data<double>(devs, std::size_t(b.face_size(f)),
                                                name + ".out" + std::to_string(p * 6 + f));
        }
    }
    return b;
}

// The initial state: field[0] = initial values, the halos at the domain's boundary its
// values, out[1] = field[0]'s faces (what "iteration -1" sent).
void reset(Block& b) {
    auto h = b.field[0].request(cascade::DataAccess::write);
    std::span<double> u = h.get();
    for (int k = 0; k < b.lz; ++k)
        for (int j = 0; j < b.ly; ++j)
            for (int i = 0; i < b.lx; ++i)
                u[i + std::size_t(b.lx) * (j + std::size_t(b.ly) * k)] =
                    initial(b.x0 + i, b.y0 + j, b.z0 + k);
    for (int f = 0; f < 6; ++f) {
        auto o = b.out[1][f].request(cascade::DataAccess::write);
        std::span<double> s = o.get();
        const int d = f / 2;
        const bool high = f % 2;
        for (int k = 0; k < b.lz; ++k)
            for (int j = 0; j < b.ly; ++j)
                for (int i = 0; i < b.lx; ++i) {
                    const int at[3] = {i, j, k};
                    const int lim[3] = {b.lx, b.ly, b.lz};
                    if (at[d] != (high ? lim[d] - 1 : 0)) continue;
                    const long fi = d == 0   ? j + long(b.ly) * k
                                    : d == 1 ? i + long(b.lx) * k
                                             : i + long(b.lx) * j;
                    s[fi] = u[i + std::size_t(b.lx) * (j + std::size_t(b.ly) * k)];
                }
        b.out[1][f].release();
        if (b.nb[f] < 0)
            for (int p = 0; p < 2; ++p) {
                auto hi = b.in[p][f].request(cascade::DataAccess::write);
                std::ranges::fill(hi.get(), f == 0 ? kBoundaryXLow : 0.0);
                b.in[p][f].release();
            }
    }
    b.field[0].release();
    b.next = 0;
    b.arrived[0] = 1;  // iteration 0 needs no launch before it
    b.arrived[1] = 0;
    b.last = {};
}

// Where iteration t of a block writes its six faces: its own out[t % 2], or for a face whose
// neighbour is on the same rank (Cascade version, --local-halos direct) that neighbour's
// incoming halo of iteration t + 1 itself.
using Faces = std::array<cascade::Data<double>, 6>;
Faces own_faces(const Block& b, int t) {
    Faces o;
    for (int f = 0; f < 6; ++f)
        o[f] = b.out[t % 2][f];
    return o;
}

// Submits iteration t of block b (reads field[t % 2], in[t % 2], writes field[(t+1) % 2] and
// the faces `o`).
cascade::DeviceTask launch(cascade::Devices& devs, const cascade::Kernel& k, Block& b, int t,
                           const Faces& o) {
    const int p = t % 2, q = 1 - p;
    const int n = b.lx * b.ly * b.lz;
    return devs.submit(
        k, cascade::read(b.field[p]), cascade::read(b.in[p][0]), cascade::read(b.in[p][1]),
        cascade::read(b.in[p][2]), cascade::read(b.in[p][3]), cascade::read(b.in[p][4]),
        cascade::read(b.in[p][5]), cascade::write(b.field[q]), cascade::write(o[0]),
        cascade::write(o[1]), cascade::write(o[2]), cascade::write(o[3]), cascade::write(o[4]),
        cascade::write(o[5]), b.lx, b.ly, b.lz, cascade::Launch{.on = b.device, .threads = {n}});
}

// Submits iteration t of block b as the split update: the boundary kernel (reads field[t % 2]
// and in[t % 2], writes the boundary of field[(t+1) % 2] and the faces `o`), then the interior
// kernel (reads field[t % 2], readwrite on field[(t+1) % 2]: it keeps the boundary the first
// wrote), in `pieces` kernels of whole z layers (each readwrite on field[(t+1) % 2], so in
// order; a boundary kernel of another block on the device runs between two pieces instead of
// waiting for the whole interior). The access modes order them, and the next iteration's
// kernels after them all; the faces depend on the boundary kernel only. Returns {boundary,
// last}; a block too thin to have an interior has only the first.
std::pair<cascade::DeviceTask, cascade::DeviceTask> launch_split(cascade::Devices& devs,
                                                                 const cascade::Kernel& boundary,
                                                                 const cascade::Kernel& interior,
                                                                 Block& b, int t, const Faces& o,
                                                                 int pieces) {
    const int p = t % 2, q = 1 - p;
    const int shell = 2 * (b.ly * b.lz + b.lx * b.lz + b.lx * b.ly);
    cascade::DeviceTask bt = devs.submit(
        boundary, cascade::read(b.field[p]), cascade::read(b.in[p][0]), cascade::read(b.in[p][1]),
        cascade::read(b.in[p][2]), cascade::read(b.in[p][3]), cascade::read(b.in[p][4]),
        cascade::read(b.in[p][5]), cascade::write(b.field[q]), cascade::write(o[0]),
        cascade::write(o[1]), cascade::write(o[2]), cascade::write(o[3]), cascade::write(o[4]),
        cascade::write(o[5]), b.lx, b.ly, b.lz,
        cascade::Launch{.on = b.device, .threads = {shell}});
    if (b.lx < 3 || b.ly < 3 || b.lz < 3) return {bt, bt};
    const int mz = b.lz - 2;
    const int n = std::clamp(pieces, 1, mz);
    cascade::DeviceTask it;
    for (int c = 0; c < n; ++c) {
        const int k0 = mz * c / n, nk = mz * (c + 1) / n - k0;
        it = devs.submit(
            interior, cascade::read(b.field[p]), cascade::readwrite(b.field[q]), b.lx, b.ly, k0, nk,
            cascade::Launch{.on = b.device, .threads = {(b.lx - 2) * (b.ly - 2) * nk}});
    }
    return {bt, it};
}

// Moves every copy the timed part uses to the block's device.
void warm(cascade::Devices& devs, const cascade::Kernel& touch, Block& b) {
    auto t = [&](cascade::DataArg<double> a, std::size_t n) {
        devs.submit(touch, a, static_cast<int>(n), cascade::Launch{.on = b.device, .threads = {1}});
    };
    t(cascade::readwrite(b.field[0]), b.field[0].size());
    t(cascade::write(b.field[1]), b.field[1].size());
    for (int p = 0; p < 2; ++p)
        for (int f = 0; f < 6; ++f) {
            t(cascade::readwrite(b.in[p][f]), b.in[p][f].size());
            t(cascade::readwrite(b.out[p][f]), b.out[p][f].size());
        }
}

// The checksum of a block's field after `iters` iterations: (fixed-point sum, plain sum).
std::pair<std::uint64_t, double> block_sum(const Block& b, int iters) {
    const std::vector<double> v = b.field[iters % 2].to_vector();
    std::uint64_t s = 0;
    double d = 0;
    for (double e : v) {
        s += fixed(e);
        d += e;
    }
    return {s, d};
}

// The same iteration on one process, plain loops, the same order of operations.
std::pair<std::uint64_t, double> serial(std::array<long, 3> n, int iters) {
    const long X = n[0] + 2, Y = n[1] + 2, Z = n[2] + 2;
    auto at = [&](long x, long y, long z) { return std::size_t(x + X * (y + Y * z)); };
    std::vector<double> u(std::size_t(X * Y * Z), 0.0), v;
    for (long z = 0; z < Z; ++z)
        for (long y = 0; y < Y; ++y)
            for (long x = 0; x < X; ++x) {
                const bool inside = x > 0 && x < X - 1 && y > 0 && y < Y - 1 && z > 0 && z < Z - 1;
                u[at(x, y, z)] =
                    inside ? initial(x - 1, y - 1, z - 1) : (x == 0 ? kBoundaryXLow : 0.0);
            }
    v = u;
    for (int t = 0; t < iters; ++t) {
        for (long z = 1; z < Z - 1; ++z)
            for (long y = 1; y < Y - 1; ++y)
                for (long x = 1; x < X - 1; ++x) {
                    double s = u[at(x - 1, y, z)];
                    s += u[at(x + 1, y, z)];
                    s += u[at(x, y - 1, z)];
                    s += u[at(x, y + 1, z)];
                    s += u[at(x, y, z - 1)];
                    s += u[at(x, y, z + 1)];
                    v[at(x, y, z)] = s / 6.0;
                }
        std::swap(u, v);
    }
    std::uint64_t s = 0;
    double d = 0;
    for (long z = 1; z < Z - 1; ++z)
        for (long y = 1; y < Y - 1; ++y)
            for (long x = 1; x < X - 1; ++x) {
                s += fixed(u[at(x, y, z)]);
                d += u[at(x, y, z)];
            }
    return {s, d};
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "Jacobi3D proxy: blocks as mobile objects with device data, against MPI + "
        "blocking kernel launches"};
    long n = 64, nx = 0, ny = 0, nz = 0;
    int iters = 20, od = 1, devices = 1, threads = 1, reps = 1;
    std::string device = "sim", system = "both";
    bool model = false, check = false;
    double bandwidth = 12e9, latency = 8e-6, launch_latency = 4e-6, rate = 2e10;
    app.add_option("--n", n, "points per side of a cubic domain");
    app.add_option("--nx", nx, "points along x (default: --n)");
    app.add_option("--ny", ny, "points along y (default: --n)");
    app.add_option("--nz", nz, "points along z (default: --n)");
    app.add_option("--iters", iters, "iterations");
    app.add_option("--od", od, "over-decomposition: blocks per device (Cascade version)")
        ->check(CLI::IsMember({1, 2, 4, 8}));
    app.add_option("--device", device, "device kind: cpu, sim, opencl, cuda")
        ->check(CLI::IsMember({"cpu", "sim", "opencl", "cuda"}));
    app.add_option("--devices", devices, "sim devices per rank");
    app.add_option("--system", system, "cascade, classic or both")
        ->check(CLI::IsMember({"cascade", "classic", "both"}));
    app.add_option("--threads", threads, "pool workers per rank");
    std::string kernels = "split";
    app.add_option("--kernels", kernels,
                   "Cascade version: the update as a boundary and an interior kernel (split), "
                   "or as one kernel (whole)")
        ->check(CLI::IsMember({"split", "whole"}));
    int pieces = 1;
    app.add_option("--interior-pieces", pieces,
                   "Cascade version, split update: the interior kernel as this many kernels of "
                   "whole z layers (0: --od, one per block on the device)");
    bool push_halos = true;
    app.add_option("--push-halos", push_halos,
                   "Cascade version: each arriving halo is copied to the device at once (1) or "
                   "when its kernel is ready (0)");
    bool backend_completes = true;
    app.add_option("--backend-completes", backend_completes,
                   "sim devices: an engine thread completes what it finished (1) or wakes the "
                   "device runtime's thread for it (0)");
    std::string local_halos = "direct";
    app.add_option("--local-halos", local_halos,
                   "Cascade version: a face for a block on the same rank is written by the "
                   "kernel straight into that block's halo on the device (direct), or travels "
                   "through the host as any other (message)")
        ->check(CLI::IsMember({"direct", "message"}));
    std::string halos = "am";
    app.add_option("--halos", halos,
                   "Cascade version: halos as large active messages (am) or object requests")
        ->check(CLI::IsMember({"am", "object"}));
    app.add_option("--reps", reps, "timed runs of each system (interleaved; median reported)");
    app.add_flag("--model", model,
                 "sim devices sleep the modelled kernel time instead of computing (no checksum)");
    app.add_option("--kernel-rate", rate, "modelled kernel speed, points per second (--model)");
    app.add_option("--bandwidth", bandwidth, "sim copy bandwidth, bytes per second");
    app.add_option("--latency", latency, "sim seconds per copy");
    app.add_option("--launch-latency", launch_latency, "sim seconds per kernel launch");
    app.add_flag("--check", check, "compare with a serial run on rank 0 (small domains)");
    int migrate_every = 0;
    app.add_option("--migrate-every", migrate_every,
                   "Cascade version: each block moves to the next rank after every K-th "
                   "iteration (needs --halos object; so does CASCADE_BALANCE)");
    std::string fail;
    app.add_option("--fail", fail,
                   "BLOCK:ITER: the kernel of block BLOCK at iteration ITER fails (Cascade "
                   "version; tests the error path)");
    double late_release = 0;
    app.add_option("--late-release", late_release,
                   "Cascade version, halos as large active messages: each face's host copy is "
                   "released this many seconds after its send completed (tests a sender that "
                   "learns late that its sends completed)");
    std::string expect;
    app.add_option("--expect", expect,
                   "the checksum the run must give (hex, as printed): checks large domains");
    CLI11_PARSE(app, argc, argv);
    const std::array<long, 3> size{nx ? nx : n, ny ? ny : n, nz ? nz : n};
    if (pieces <= 0) pieces = od;
    if (device != "sim") devices = 1;
    int fail_block = -1, fail_iter = -1;
    if (!fail.empty() && std::sscanf(fail.c_str(), "%d:%d", &fail_block, &fail_iter) != 2) {
        std::fprintf(stderr, "jacobi3d: --fail takes BLOCK:ITER, not '%s'\n", fail.c_str());
        return 2;
    }
    if (model && device != "sim") {
        std::fprintf(stderr, "jacobi3d: --model needs --device sim\n");
        return 2;
    }

    cascade::Communicator comm;
    cascade::Threadpool tp(threads, &comm, 0, "jacobi3d", false);
    cascade::DevicesOptions dopts;
    if (device == "sim") {
        dopts.cpu = false;
        dopts.sim = devices;
        dopts.sim_options.bandwidth = bandwidth;
        dopts.sim_options.latency = latency;
        dopts.sim_options.launch_latency = launch_latency;
        dopts.sim_options.run_kernels = !model;
        dopts.complete_on_backend = backend_completes;
    } else if (device == "opencl") {
        dopts.opencl = 1;
    } else if (device == "cuda") {
        dopts.cuda = 1;
    }
    std::unique_ptr<cascade::Devices> devices_of_rank;
    try {
        devices_of_rank = std::make_unique<cascade::Devices>(tp, dopts);
    } catch (const cascade::UsageError& e) {  // e.g. no such device here
        std::fprintf(stderr, "jacobi3d: %s\n", e.what());
        return 2;
    }
    cascade::Devices& devs = *devices_of_rank;
    const int first = device == "sim"      ? devs.find(cascade::DeviceKind::sim)
                      : device == "opencl" ? devs.find(cascade::DeviceKind::opencl)
                      : device == "cuda"   ? devs.find(cascade::DeviceKind::cuda)
                                           : devs.find(cascade::DeviceKind::cpu);
    cascade::Objects objs(tp, comm);
    const int me = comm.rank(), ranks = comm.ranks();
    // Blocks that migrate arrive with their Data on this rank's Devices.
    cascade::set_object_devices(&devs);
    const bool moving = migrate_every > 0 || objs.balancer() != nullptr;
    if (moving && halos != "object" && system != "classic") {
        if (me == 0)
            std::fprintf(stderr,
                         "jacobi3d: blocks that migrate (--migrate-every, CASCADE_BALANCE) need "
                         "--halos object\n");
        return 2;
    }
    MPI_Comm world;
    MPI_Comm_dup(comm.mpi_comm(), &world);

    // Modelled kernels (sim devices that sleep): same arguments, no computation.
    // A kernel's modelled time is its work items (points) at the kernel rate.
    cascade::Kernel update_model("jacobi_update"), boundary_model("jacobi_boundary"),
        interior_model("jacobi_interior"), touch_model("jacobi_touch");
    for (cascade::Kernel* k : {&update_model, &boundary_model, &interior_model})
        k->cpu([](cascade::KernelArgs&) {}).model([rate](const cascade::Threads& t) {
            return static_cast<double>(t.global[0]) / rate;
        });
    touch_model.cpu([](cascade::KernelArgs&) {}).model([](const cascade::Threads&) { return 0.0; });
    const cascade::Kernel& update = model ? update_model : jacobi_update;
    const cascade::Kernel& boundary = model ? boundary_model : jacobi_boundary;
    const cascade::Kernel& interior = model ? interior_model : jacobi_interior;
    const cascade::Kernel& touch = model ? touch_model : jacobi_touch;
    // The kernel --fail injects: it throws on the device.
    cascade::Kernel failing("jacobi_update");
    failing.cpu([](cascade::KernelArgs&) { throw std::runtime_error("injected kernel failure"); });
    // The earliest iteration whose kernel failed on this rank ("block B, iteration T: what").
    // The kernels after it on the same block fail with its exception, and their on_done
    // continuations may run first: the lowest iteration is the one that failed by itself.
    std::mutex failure_mu;
    std::string failure;
    int failure_iter = std::numeric_limits<int>::max();
    auto failed = [&](const std::string& what, int t) {
        std::lock_guard<std::mutex> g(failure_mu);
        if (failure.empty() || t < failure_iter) {
            failure = what;
            failure_iter = t;
        }
    };

    // ---- the Cascade version: blocks as mobile objects ---------------------------------
    const int per_rank = devices * od;
    const Geometry g(size, ranks * per_rank);
    auto ptr = [&](int id) {
        return cascade::mobile_ptr<Block>(
            cascade::ObjectKey{id / per_rank, 0, static_cast<std::uint64_t>(id % per_rank + 1)});
    };
    std::vector<cascade::mobile_ptr<Block>> mine;
    for (int l = 0; l < per_rank; ++l)
        mine.push_back(
            objs.create<Block>(make_block(devs, g, me * per_rank + l, first + l % devices)));

    // The blocks of this rank by local index (they never move, so the pointers stay valid).
    std::vector<Block*> local(mine.size());
    for (std::size_t l = 0; l < mine.size(); ++l)
        local[l] = objs.local(mine[l]);
    auto block = [&](int id) { return local[static_cast<std::size_t>(id % per_rank)]; };

    // A face's host copy is requested from the kernel that writes it until its send has
    // completed (the sender's on_sent, which may come after the neighbour's reply arrived: the
    // neighbour got the bytes before the sender's communication thread saw the send end). A
    // Data takes one host request at a time, so the request for iteration t + 2 is issued with
    // its kernels only if the one of iteration t is released by then; otherwise the kernels'
    // continuation issues it (that kernel writes the face, so it ran after the release).
    // Per block (by id: a block's requests and releases happen on the rank it is on) and per
    // parity and face: whether the face's host copy is requested.
    struct FaceHolds {
        std::mutex mu;
        bool held[2][6] = {};
    };
    std::unique_ptr<FaceHolds[]> holds(new FaceHolds[static_cast<std::size_t>(g.blocks)]);
    auto request_face = [&](Block& b, int p, int f) {
        FaceHolds& h = holds[static_cast<std::size_t>(b.id)];
        std::lock_guard<std::mutex> lk(h.mu);
        h.held[p][f] = true;
        return b.out[p][f].request(cascade::DataAccess::read);
    };
    auto request_face_if_free = [&](Block& b, int p,
                                    int f) -> std::optional<cascade::HostAccess<double>> {
        FaceHolds& h = holds[static_cast<std::size_t>(b.id)];
        std::lock_guard<std::mutex> lk(h.mu);
        if (h.held[p][f]) return std::nullopt;
        h.held[p][f] = true;
        return b.out[p][f].request(cascade::DataAccess::read);
    };
    auto release_face = [&](Block& b, int p, int f) {
        FaceHolds& h = holds[static_cast<std::size_t>(b.id)];
        std::lock_guard<std::mutex> lk(h.mu);
        b.out[p][f].release();
        h.held[p][f] = false;
    };
    // --late-release: faces whose send completed, released by this thread when due.
    struct LateRelease {
        Clock::time_point due;
        Block* b;
        int p, f;
    };
    std::mutex late_mu;
    std::condition_variable late_cv;
    std::deque<LateRelease> late;
    bool late_stop = false;
    std::thread late_thread;
    if (late_release > 0)
        late_thread = std::thread([&] {
            std::unique_lock<std::mutex> lk(late_mu);
            for (;;) {
                late_cv.wait(lk, [&] { return late_stop || !late.empty(); });
                if (late.empty()) return;
                const LateRelease r = late.front();
                if (Clock::now() < r.due) {
                    late_cv.wait_until(lk, r.due);
                    continue;
                }
                late.pop_front();
                lk.unlock();
                release_face(*r.b, r.p, r.f);
                lk.lock();
            }
        });
    struct StopLate {
        std::function<void()> f;
        ~StopLate() { f(); }
    } stop_late{[&] {
        {
            std::lock_guard<std::mutex> lk(late_mu);
            late_stop = true;
        }
        late_cv.notify_all();
        if (late_thread.joinable()) late_thread.join();
    }};

    // Sends face f of block `from`, the input of iteration t of block from.nb[f], from the
    // host copy `s` of out[(t + 1) % 2][f] (granted), and releases that copy once sent.
    std::function<void(Block & from, int t, int f, std::span<double> s)> ship;
    // Blocks that migrate: reads the faces iteration t wrote and ships them, where the block
    // is now (an object request, `faces` below).
    std::function<void(int id, int t)> send_faces;
    // Counts an arrival for iteration t at block `id` (the handler `arrived` below).
    std::function<void(int id, int t)> notify_arrival;
    // Whether face f of b is written straight into its neighbour's halo (same rank).
    const bool direct_halos = local_halos == "direct" && !moving;
    auto local_direct = [&](const Block& b, int f) {
        return direct_halos && b.nb[f] >= 0 && b.nb[f] / per_rank == me;
    };
    // Launches the iterations of b whose arrivals are complete, in order.
    auto try_launch = [&](Block& b) {
        while (b.next < iters && b.arrived[b.next % 2] == b.expected) {
            const int t = b.next;
            b.arrived[t % 2] = 0;
            const bool fails = b.id == fail_block && t == fail_iter;
            // `faces`: the kernel that writes the outgoing faces (the boundary kernel when
            // split: the faces travel while the interior kernel runs).
            // Faces for blocks of this rank go straight into their halos (direct below).
            std::array<bool, 6> direct{};
            Faces o = own_faces(b, t);
            for (int f = 0; f < 6; ++f)
                if (local_direct(b, f)) {
                    direct[f] = true;
                    o[f] = block(b.nb[f])->in[(t + 1) % 2][f ^ 1];
                }
            cascade::DeviceTask faces;
            if (kernels == "split") {
                std::tie(faces, b.last) =
                    launch_split(devs, fails ? failing : boundary, interior, b, t, o, pieces);
            } else {
                b.last = faces = launch(devs, fails ? failing : update, b, t, o);
            }
            faces.on_done([&, id = b.id, t](std::exception_ptr e) {
                if (!e) return;
                std::string what;
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    what = x.what();
                } catch (...) {
                    what = "unknown error";
                }
                failed("block " + std::to_string(id) + ", iteration " + std::to_string(t) + ": " +
                           what,
                       t);
            });
            ++b.next;
            if (b.next < iters) ++b.arrived[b.next % 2];
            if (t + 1 >= iters) continue;
            if (moving) {
                faces.then([&, t, id = b.id] { send_faces(id, t); });
                continue;
            }
            // A face written into a neighbour's halo on this rank arrives there now: the
            // neighbour's kernels of iteration t + 1, submitted after this one, read it after
            // it (the device layer orders them by their access modes), and this kernel, which
            // overwrites that halo, was submitted after the neighbour's kernels of iteration
            // t - 1 that read it (their faces were among this launch's arrivals).
            for (int f = 0; f < 6; ++f)
                if (direct[f]) notify_arrival(b.nb[f], t + 1);
            // Each face it writes is requested on the host now, behind the kernel: the
            // runtime copies it out as soon as the kernel ends, without waiting for a worker
            // to ask, and the face is sent as soon as its copy is granted (on_granted queues
            // the send then; nothing waits for it meanwhile). A face whose previous send has
            // not completed yet is requested instead by a continuation of the kernel
            // (FaceHolds above), which waits for its grant with get().
            std::array<bool, 6> later{};
            bool any_later = false;
            for (int f = 0; f < 6; ++f) {
                if (b.nb[f] < 0 || direct[f]) continue;
                if (auto h = request_face_if_free(b, t % 2, f)) {
                    h->on_granted([&, t, f, bp = &b, h = *h] {
                        if (h.task().failed()) return;  // the kernel failed: on_done reports it
                        ship(*bp, t + 1, f, h.get());
                    });
                } else {
                    later[f] = any_later = true;
                }
            }
            if (!any_later) continue;
            faces.then([&, t, bp = &b, later] {
                for (int f = 0; f < 6; ++f)
                    if (later[f]) ship(*bp, t + 1, f, request_face(*bp, t % 2, f).get());
            });
        }
    };
    // A halo that has just arrived in its host copy (a granted write access) starts its copy to
    // the block's device at once, before release(): the kernel that reads it finds it there
    // (or in flight) instead of copying it in when the previous kernel ends. Nothing is
    // pushed when the device's memory is the host's (cpu), or it has no room.
    auto to_device = [&](const Block& b, const cascade::Data<double>& h) {
        if (push_halos) h.push_range(b.device, 0, h.size());
    };
    // Halos as object requests: the face's bytes in a std::vector, written into the halo's
    // host copy by the receiving block's handler.
    auto halo = objs.make_handler<Block>(
        [&](Block& b, int& t, int& f, std::vector<double>& v) {
            auto h = b.in[t % 2][f].request(cascade::DataAccess::write);
            std::span<double> s = h.get();
            std::copy(v.begin(), v.end(), s.begin());
            to_device(b, b.in[t % 2][f]);
            b.in[t % 2][f].release();
            ++b.arrived[t % 2];
            try_launch(b);
        },
        {.name = "halo"});
    // Halos as large active messages: from the face's host copy straight into the halo's
    // (where_to grants the receiver's write request); then the block counts the arrival.
    auto arrived = objs.make_handler<Block>(
        [&](Block& b, int& t) {
            ++b.arrived[t % 2];
            try_launch(b);
        },
        {.name = "arrived"});
    notify_arrival = [&](int id, int t) { arrived->invoke(ptr(id), t); };
    auto* halo_am = comm.make_large_active_msg(
        [&](int& to, int& t, int& f, int&) {  // on_arrival, at the receiver
            const Block& b = *block(to);
            to_device(b, b.in[t % 2][f]);
            b.in[t % 2][f].release();
            arrived->invoke(ptr(to), t);
        },
        [&](int& to, int& t, int& f, int&) {  // where_to, at the receiver
            auto h = block(to)->in[t % 2][f].request(cascade::DataAccess::write);
            return h.get().data();
        },
        [&](int&, int& t, int& f, int& from) {  // on_sent, at the sender
            Block& b = *block(from);
            if (late_release > 0) {
                {
                    std::lock_guard<std::mutex> lk(late_mu);
                    late.push_back({Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                       std::chrono::duration<double>(late_release)),
                                    &b, (t + 1) % 2, f ^ 1});
                }
                late_cv.notify_all();
                return;
            }
            release_face(b, (t + 1) % 2, f ^ 1);
        },
        "jacobi3d halo");
    ship = [&](Block& from, int t, int f, std::span<double> s) {
        const int to = from.nb[f];
        if (halos == "am") {
            halo_am->send_large(to / per_rank, cascade::view<double>(s.data(), s.size()), to, t,
                                f ^ 1, from.id);
        } else {
            std::vector<double> v(s.begin(), s.end());
            release_face(from, (t + 1) % 2, f);
            halo->invoke(ptr(to), t, f ^ 1, std::move(v));
        }
    };
    auto faces = objs.make_handler<Block>(
        [&](Block& b, int& t) {
            std::vector<cascade::HostAccess<double>> hs;
            for (int f = 0; f < 6; ++f)
                if (b.nb[f] >= 0) hs.push_back(request_face(b, t % 2, f));
            std::size_t i = 0;
            for (int f = 0; f < 6; ++f)
                if (b.nb[f] >= 0) ship(b, t + 1, f, hs[i++].get());
            if (migrate_every > 0 && (t + 1) % migrate_every == 0 && ranks > 1)
                objs.migrate(ptr(b.id), (objs.rank() + 1) % ranks);
        },
        {.name = "faces"});
    send_faces = [&](int id, int t) { faces->invoke(ptr(id), t); };
    // Blocks that migrate: the initial state, prepared where the block is.
    auto prepare = objs.make_handler<Block>(
        [&](Block& b) {
            reset(b);
            warm(devs, touch, b);
        },
        {.name = "prepare"});
    // Blocks that migrate: a block's state after a run, read where it is.
    struct Report {
        int next = 0;
        int pending = 0;  // its last kernel had not finished
        std::uint64_t sum = 0;
        double dsum = 0;
    };
    auto report = objs.make_handler<Block>(
        [&](Block& b) {
            Report r;
            r.next = b.next;
            r.pending = b.last.valid() && !b.last.ready();
            if (!model) std::tie(r.sum, r.dsum) = block_sum(b, iters);
            return r;
        },
        {.name = "report"});
    auto kick = objs.make_handler<Block>(
        [&](Block& b) {
            // Iteration 0's halos: the initial faces (out[1]).
            for (int f = 0; f < 6; ++f)
                if (b.nb[f] >= 0) ship(b, 0, f, request_face(b, 1, f).get());
            try_launch(b);
        },
        {.name = "kick"});
    tp.join();  // every rank created its blocks

    // ---- the classic version: one block per device, MPI exchange, blocking launches ----
    const Geometry gc(size, ranks * devices);
    std::vector<Block> cblocks;
    auto cowner = [&](int id) { return id / devices; };
    if (system != "cascade")
        for (int l = 0; l < devices; ++l)
            cblocks.push_back(make_block(devs, gc, me * devices + l, first + l));

    auto run_classic = [&] {
        std::vector<MPI_Request> reqs;
        std::vector<cascade::Data<double>> held;
        std::vector<cascade::DeviceTask> tasks;
        for (int t = 0; t < iters; ++t) {
            const int p = t % 2, q = 1 - p;  // out[q]: what the previous iteration wrote
            reqs.clear();
            held.clear();
            for (Block& b : cblocks)
                for (int f = 0; f < 6; ++f)
                    if (b.nb[f] >= 0) {
                        auto h = b.in[p][f].request(cascade::DataAccess::write);
                        std::span<double> s = h.get();
                        held.push_back(b.in[p][f]);
                        reqs.emplace_back();
                        MPI_Irecv(s.data(), static_cast<int>(s.size()), MPI_DOUBLE, cowner(b.nb[f]),
                                  b.id * 6 + f, world, &reqs.back());
                    }
            std::vector<cascade::HostAccess<double>> outs;
            for (Block& b : cblocks)
                for (int f = 0; f < 6; ++f)
                    if (b.nb[f] >= 0)
                        outs.push_back(b.out[q][f].request(cascade::DataAccess::read));
            std::size_t o = 0;
            for (Block& b : cblocks)
                for (int f = 0; f < 6; ++f)
                    if (b.nb[f] >= 0) {
                        std::span<double> s = outs[o++].get();
                        held.push_back(b.out[q][f]);
                        reqs.emplace_back();
                        MPI_Isend(s.data(), static_cast<int>(s.size()), MPI_DOUBLE, cowner(b.nb[f]),
                                  b.nb[f] * 6 + (f ^ 1), world, &reqs.back());
                    }
            MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
            for (auto& d : held)
                d.release();
            tasks.clear();
            for (Block& b : cblocks)
                tasks.push_back(launch(devs, update, b, t, own_faces(b, t)));
            for (auto& k : tasks)
                k.get();
        }
    };

    // ---- runs, interleaved ---------------------------------------------------------------
    std::vector<double> t_cascade, t_classic;
    std::uint64_t sum_cascade = 0, sum_classic = 0;
    double dsum_cascade = 0, dsum_classic = 0;
    bool complete = true;
    auto timed = [&](auto&& body) {
        MPI_Barrier(world);
        const auto t0 = Clock::now();
        body();
        double s = std::chrono::duration<double>(Clock::now() - t0).count(), all = 0;
        MPI_Allreduce(&s, &all, 1, MPI_DOUBLE, MPI_MAX, world);
        return all;
    };
    auto checksum = [&](auto&& blocks_of) {
        std::uint64_t s = 0, all = 0;
        double d = 0, dall = 0;
        blocks_of([&](const Block& b) {
            auto [bs, bd] = block_sum(b, iters);
            s += bs;
            d += bd;
        });
        MPI_Allreduce(&s, &all, 1, MPI_UINT64_T, MPI_SUM, world);
        MPI_Allreduce(&d, &dall, 1, MPI_DOUBLE, MPI_SUM, world);
        return std::pair{all, dall};
    };
    for (int r = 0; r < reps; ++r) {
        if (system != "classic") {
            tp.start();
            if (moving) {
                for (auto p : mine)
                    prepare->invoke(p);
            } else {
                for (auto p : mine) {
                    Block& b = *objs.local(p);
                    reset(b);
                    warm(devs, touch, b);
                }
                devs.wait_all();
            }
            tp.join();
            t_cascade.push_back(timed([&] {
                tp.start();
                for (auto p : mine)
                    kick->invoke(p);
                try {
                    tp.join();
                } catch (const std::exception& e) {
                    failed(e.what(), std::numeric_limits<int>::max());
                }
            }));
            // A failed kernel: the run ends with its message, no checksum is read.
            int any = !failure.empty(), all = 0;
            MPI_Allreduce(&any, &all, 1, MPI_INT, MPI_MAX, world);
            if (all) {
                if (any) std::fprintf(stderr, "jacobi3d: rank %d: %s\n", me, failure.c_str());
                MPI_Comm_free(&world);
                return 1;
            }
            if (moving) {
                // Every rank asks for its blocks' reports and answers the others' in one run
                // of the pool: a block may live on another rank now, which must keep serving
                // requests until every report has arrived (join() ends only then).
                std::vector<cascade::future<Report>> asked;
                tp.start();
                for (auto p : mine)
                    asked.push_back(report->call(p));
                tp.join();
                std::uint64_t s = 0;
                double d = 0;
                for (auto& f : asked) {
                    const Report r = f.get();
                    if (r.next != iters || r.pending) complete = false;
                    s += r.sum;
                    d += r.dsum;
                }
                MPI_Allreduce(&s, &sum_cascade, 1, MPI_UINT64_T, MPI_SUM, world);
                MPI_Allreduce(&d, &dsum_cascade, 1, MPI_DOUBLE, MPI_SUM, world);
                std::uint64_t moved = objs.stats().migrations_out, all_moved = 0;
                MPI_Allreduce(&moved, &all_moved, 1, MPI_UINT64_T, MPI_SUM, world);
                if (me == 0)
                    std::printf("jacobi3d cascade: %llu block migrations\n",
                                static_cast<unsigned long long>(all_moved));
            } else {
                // join() returned: every block's last kernel must have finished.
                for (auto p : mine) {
                    const Block& b = *objs.local(p);
                    if (b.next != iters || !b.last.valid() || !b.last.ready()) complete = false;
                }
                if (!model)
                    std::tie(sum_cascade, dsum_cascade) = checksum([&](auto&& f) {
                        for (auto p : mine)
                            f(*objs.local(p));
                    });
            }
        }
        if (system != "cascade") {
            tp.start();
            for (Block& b : cblocks) {
                reset(b);
                warm(devs, touch, b);
            }
            devs.wait_all();
            tp.join();
            t_classic.push_back(timed([&] {
                // A classic MPI program has no runtime threads polling beside it: the pool
                // (and its communication thread) runs only when the cpu device needs its
                // workers; the device runtime's own thread runs the other devices.
                const bool pool = device == "cpu";
                if (pool) tp.start();
                run_classic();
                if (pool) tp.join();
            }));
            if (!model)
                std::tie(sum_classic, dsum_classic) = checksum([&](auto&& f) {
                    for (const Block& b : cblocks)
                        f(b);
                });
        }
    }

    // ---- the answer ------------------------------------------------------------------------
    int bad = 0;
    int all_complete = complete, c = 0;
    MPI_Allreduce(&all_complete, &c, 1, MPI_INT, MPI_MIN, world);
    if (!c) {
        if (me == 0) std::printf("jacobi3d: join() returned before the last kernels finished\n");
        bad = 1;
    }
    std::uint64_t ref = 0;
    double dref = 0;
    const bool want_serial = !model && (check || size[0] * size[1] * size[2] <= (1L << 18));
    if (want_serial && me == 0) std::tie(ref, dref) = serial(size, iters);
    if (me == 0 && !model) {
        auto verdict = [&](const char* sys, std::uint64_t s, double d) {
            bool ok = true;
            if (want_serial && s != ref) ok = false;
            if (!expect.empty() && s != std::stoull(expect, nullptr, 16)) ok = false;
            if (system == "both" && sum_cascade != sum_classic) ok = false;
            std::printf("jacobi3d %s: checksum %016llx (sum %.12g)%s\n", sys,
                        static_cast<unsigned long long>(s), d, ok ? "" : " WRONG");
            bad |= !ok;
        };
        if (want_serial)
            std::printf("jacobi3d serial: checksum %016llx (sum %.12g)\n",
                        static_cast<unsigned long long>(ref), dref);
        if (system != "classic") verdict("cascade", sum_cascade, dsum_cascade);
        if (system != "cascade") verdict("classic", sum_classic, dsum_classic);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, world);
    if (me == 0) {
        auto rec = [&](const char* sys, int o, const std::vector<double>& ts, int blocks) {
            cascade_bench::Record r;
            r.add("app", "jacobi3d")
                .add("bench", "jacobi3d")
                .add("system", sys)
                .add("od", o)
                .add("ranks", ranks)
                .add("devices", devices)
                .add("device", device)
                .add("model", model)
                .add("nx", size[0])
                .add("ny", size[1])
                .add("nz", size[2])
                .add("iters", iters)
                .add("blocks", blocks)
                .add("seconds", median(ts))
                .add("runs", ts)
                .add("ok", !bad);
            r.print_result();
            std::printf(
                "jacobi3d %s: %d ranks x %d %s device(s), %d blocks, %ldx%ldx%ld, %d "
                "iterations: %.4f s (median of %zu)\n",
                sys, ranks, devices, device.c_str(), blocks, size[0], size[1], size[2], iters,
                median(ts), ts.size());
        };
        if (!t_cascade.empty()) rec("cascade", od, t_cascade, g.blocks);
        if (!t_classic.empty()) rec("classic", 1, t_classic, gc.blocks);
        if (!t_cascade.empty() && !t_classic.empty())
            std::printf("jacobi3d: cascade / classic time = %.3f\n",
                        median(t_cascade) / median(t_classic));
    }
    cblocks.clear();
    MPI_Comm_free(&world);
    return bad ? 1 : 0;
}

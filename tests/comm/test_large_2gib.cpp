// One large active message with a body over 2 GiB (more than an MPI int count), sent in
// chunks and checked on arrival. Skipped when the machine lacks the memory.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "cascade/cascade.hpp"

TEST(LargeActiveMsg, BodyOverTwoGiB) {
    const std::size_t bytes = (std::size_t(2) << 30) + 4099;
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int enough =
        static_cast<double>(pages) * static_cast<double>(page) > 3.0 * static_cast<double>(bytes);
    int all_enough = 0;
    MPI_Allreduce(&enough, &all_enough, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_enough) GTEST_SKIP() << "not enough free memory for two 2 GiB buffers";

    cascade::Communicator comm;
    cascade::Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    std::vector<std::uint64_t> buf;
    const std::size_t words = bytes / 8;
    int arrived = 0, sent = 0;
    long bad = 0;
    auto am = comm.make_large_active_msg(
        [&](std::size_t& w) {
            ++arrived;
            for (std::size_t i = 0; i < w; i += 4093)
                if (buf[i] != i * 2654435761u) ++bad;
            if (buf[w - 1] != (w - 1) * 2654435761u) ++bad;
        },
        [&](std::size_t& w) {
            buf.assign(w, 0);
            return buf.data();
        },
        [&](std::size_t&) { ++sent; });
    if (me == 0) {
        std::vector<std::uint64_t> out(words);
        for (std::size_t i = 0; i < words; ++i)
            out[i] = i * 2654435761u;
        am->send_large((me + 1) % n, cascade::view<std::uint64_t>(out.data(), words), words);
        tp.join();
        EXPECT_EQ(sent, 1);
    } else {
        tp.join();
    }
    if (me == 1 % n) {
        EXPECT_EQ(arrived, 1);
        EXPECT_EQ(bad, 0);
    }
}

// LargeReceives: posting and cancelling the receives of bodies and big messages.
#include "cascade/comm/detail/large_receives.hpp"

#include <algorithm>

#include "internal.hpp"

namespace cascade::detail {

using namespace comm_detail;

PendingRecv& LargeReceives::post_body(MPI_Comm comm, PendingRecv r, void* dest, std::size_t chunk,
                                      int tag) {
    for (std::size_t off = 0; off < r.bytes; off += chunk) {
        const int n = static_cast<int>(std::min(chunk, r.bytes - off));
        MPI_Request req;
        check_mpi(MPI_Irecv(static_cast<char*>(dest) + off, n, MPI_BYTE, r.source, tag, comm, &req),
                  "MPI_Irecv");
        r.reqs.push_back(req);
    }
    bodies_.push_back(std::move(r));
    return bodies_.back();
}

void LargeReceives::post_big(MPI_Comm comm, int source, Bytes buf, int tag) {
    BigRecv b{source, std::move(buf), MPI_REQUEST_NULL};
    check_mpi(MPI_Irecv(b.buf.data(), static_cast<int>(b.buf.size()), MPI_BYTE, source, tag, comm,
                        &b.req),
              "MPI_Irecv");
    big_.push_back(std::move(b));
}

void LargeReceives::cancel_all() noexcept {
    for (auto& r : bodies_)
        for (auto& q : r.reqs) {
            MPI_Cancel(&q);
            MPI_Request_free(&q);
        }
    for (auto& b : big_) {
        MPI_Cancel(&b.req);
        MPI_Request_free(&b.req);
    }
}

void LargeReceives::failed(int rc, const char* what) {
    check_mpi(rc, what);
    throw std::logic_error("LargeReceives::failed: MPI_SUCCESS");
}

}  // namespace cascade::detail

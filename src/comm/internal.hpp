// Internals shared by the Communicator's source files: MPI tags, message limits, helpers.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "cascade/comm/detail/constants.hpp"
#include "cascade/comm/detail/frames.hpp"

namespace cascade {
class Broadcasts;
class Communicator;
namespace comm_detail {

using namespace detail::comm;  // the constants (cascade/comm/detail/constants.hpp)

inline int am_tag(std::uint32_t epoch) {
    return (epoch & 1) ? TAG_AM_ODD : TAG_AM;
}

// The Communicator whose progress this thread drives (set in progress() / poll()).
extern thread_local const Communicator* tls_comm_thread;

// The Communicator's Broadcasts: the broadcast layer's when it is linked (it registered its
// factory), else a stand-in without detection that refuses sends to a list (broadcasts.cpp).
std::unique_ptr<Broadcasts> make_broadcasts(Communicator& comm);

inline std::size_t round8(std::size_t n) {
    return (n + 7) & ~std::size_t(7);
}

inline void check_mpi(int rc, const char* what) {
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        throw std::runtime_error(std::string("cascade: ") + what + " failed: " + msg);
    }
}

}  // namespace comm_detail
}  // namespace cascade

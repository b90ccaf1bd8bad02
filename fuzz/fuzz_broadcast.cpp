// Fuzz target: the broadcast layer's message handlers (a small broadcast, a large one's
// header, a serial body's acknowledgement, a delivery acknowledgement) on arbitrary bytes, in
// a one-rank job. The first byte picks the message; headers name a registered user message
// (its id and signature are patched in, so the rest of the header and the arguments are what
// gets fuzzed). Malformed input must raise an exception (WireError, UsageError, bad_alloc),
// nothing else: no division by a piece size of zero, no unbounded receives, no tag outside
// the broadcasts' range.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cascade/broadcast/detail/engine.hpp"
#include "cascade/cascade.hpp"
#include "cascade/comm/detail/test_access.hpp"
#include "fuzz_common.hpp"

using namespace cascade;
using cascade::broadcast::detail::Header;

namespace {

struct World {
    Communicator comm;
    Threadpool tp{1, &comm, 0, "fuzz", false};  // never started
    std::vector<char> sink = std::vector<char>(1 << 16);
    ActiveMsg<int, std::vector<int>>* user_small = nullptr;
    ActiveMsgBase* user_large = nullptr;
    World() {
        user_small = comm.make_active_msg([](int&, std::vector<int>&) {}, "user_small");
        user_large = comm.make_large_active_msg([](int&) {}, [this](int&) { return sink.data(); },
                                                [](int&) {}, "user_large");
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    World& w = fuzz::world<World>();
    if (size < 2) return 0;
    fuzz::Input in(data, size);  // messages arrive 8-byte aligned
    const std::uint8_t mode = in.mode;
    char* p = in.p;
    const std::size_t n = in.n;
    // The broadcast layer registers its messages first, in this order.
    ActiveMsgBase* am = w.comm.find_am(mode % 4);
    try {
        if (mode % 4 < 2 && n >= sizeof(Header)) {
            Header h;
            std::memcpy(&h, p, sizeof h);
            const ActiveMsgBase& user =
                mode % 4 == 0 ? static_cast<ActiveMsgBase&>(*w.user_small) : *w.user_large;
            h.am = user.id();
            h.sig = user.signature();
            if (mode & 0x80) {  // the one header this rank accepts: its own, to itself
                h.root = 0;
                h.from = 0;
            }
            std::memcpy(p, &h, sizeof h);
        }
        am->on_frame(0, p, n);
    } catch (const std::exception&) {
    }
    // Bodies the input announced never come: their receives are dropped, each input starts
    // from a clean rank.
    cascade::detail::CommTestAccess::drop_body_receives(w.comm);
    try {
        fuzz::drain(w.comm);
    } catch (const std::exception&) {
    }
    return 0;
}

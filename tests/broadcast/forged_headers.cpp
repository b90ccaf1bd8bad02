// Broadcast headers forged on rank 1 and sent to rank 0 as the broadcast layer's own large
// message (run by expect_failure.sh): rank 0 must end the job naming what is wrong, not
// divide by zero, post unbounded receives, or match the body on another stream's tag.
//   piece0     a body of 4096 bytes in pieces of 0 bytes
//   tinypiece  a body of 1 GiB in pieces of 1 byte
//   tag        a body on tag -1 (the ordered body stream of large active messages)
//   from       a header that says it comes from rank 0 itself
//   recipient  a sub-list naming a rank outside the job
//   after      (3 ranks) a forward from rank 1 of root 2's broadcast that runs after 1000 of
//              root 2's messages, which never come: not run, and never silently dropped
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cascade/broadcast/detail/engine.hpp"
#include "cascade/broadcast/tree.hpp"
#include "cascade/cascade.hpp"

using namespace cascade;
using cascade::broadcast::Recipient;
using cascade::broadcast::detail::Header;

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    Communicator comm;
    Threadpool tp(1, &comm);
    std::vector<char> sink(4096);
    auto user = comm.make_large_active_msg([](int&) {}, [&](int&) { return sink.data(); },
                                           [](int&) {}, "user");
    if (comm.rank() == 1) {
        // The broadcast layer registers its messages first: "broadcast", "broadcast.large".
        ActiveMsgBase* large = cascade::detail::LayerLink::find_am(comm, 1);
        if (!large || large->name() != "broadcast.large") return 2;
        Header h{user->id(), user->signature(),
                 1,          1,
                 0,          cascade::detail::LayerLink::new_body_tag(comm),
                 4096,       4096,
                 0,          0,
                 0};
        std::vector<Recipient> sub;
        if (mode == "piece0") h.piece = 0;
        if (mode == "tinypiece") {
            h.bytes = std::uint64_t(1) << 30;
            h.piece = 1;
        }
        if (mode == "tag") h.tag = -1;
        if (mode == "from") h.from = 0;
        if (mode == "recipient") sub.push_back(Recipient{comm.ranks() + 5, 0.f});
        if (mode == "after") {
            if (comm.ranks() < 3) return 3;
            h.root = 2;
            h.after = 1000;
        }
        std::vector<char> args(8, 0);
        int x = 0;
        std::memcpy(args.data(), &x, sizeof x);
        const view<const Recipient> s(sub.data(), sub.size());
        const view<const char> a(args.data(), 4);
        const std::size_t bytes = wire::size_of(h) + wire::size_of(s) + wire::size_of(a);
        cascade::detail::LayerLink::enqueue(comm, 0, *large, bytes, [&](char* out) {
            wire::Writer w(out);
            w.put(h);
            w.put(s);
            w.put(a);
            return w.position();
        });
    }
    tp.join();
    return 0;
}

// Fuzz target: the futures layer's message handlers (a call's request, a reply, a fetch) on
// arbitrary bytes, in a one-rank job. The first byte picks the message. Requests are sent
// to registered functions (their id and signature are patched in, so the arguments are what
// gets fuzzed) with a reply token that names a live state, and the reply is then delivered;
// replies get a live token too half of the time. Malformed input must raise an exception
// (WireError, UsageError, bad_alloc), nothing else: no reply token is ever taken for an
// address.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cascade/cascade.hpp"
#include "cascade/comm/detail/test_access.hpp"
#include "fuzz_common.hpp"

namespace cascade::detail {

struct FuzzFutures {
    static void request(Futures& fx, const char* p, std::size_t n) { fx.on_request(0, p, n); }
    static void reply(Futures& fx, const char* p, std::size_t n) { fx.on_reply(0, p, n); }
    static void fetch(Futures& fx, const char* p, std::size_t n) { fx.on_fetch(0, p, n); }
    static ReplyTokens<StateBase>& tokens(Futures& fx) { return fx.tokens_; }
    static std::uint32_t sig(Futures& fx, std::uint32_t fn) { return fx.fns_[fn].load()->sig; }
};

}  // namespace cascade::detail

using namespace cascade;
using detail::FuzzFutures;
using detail::State;
using detail::StateBase;

namespace {

struct Pod {
    std::int32_t a;
    double b;
};

struct World {
    Communicator comm;
    Threadpool tp{1, &comm, 0, "fuzz", false};  // never started: calls run in the handler
    Futures fx{tp, &comm};
    static constexpr std::uint32_t kFns = 4;
    // What each function returns, to make a state of the right type for its reply.
    StateBase* (*make_state[kFns])() = {
        [] { return static_cast<StateBase*>(new State<int>()); },
        [] { return static_cast<StateBase*>(new State<std::string>()); },
        [] { return static_cast<StateBase*>(new State<void>()); },
        [] { return static_cast<StateBase*>(new State<Pod>()); },
    };
    World() {
        const AsyncOptions opts{.run_in_handler = true};
        fx.make_async([](int x, double y) { return x + static_cast<int>(y > 0); }, "f0", opts);
        fx.make_async([](std::string s, bool b) { return b ? s : std::string(); }, "f1", opts);
        fx.make_async([](Pod p, shared_future<int> f) { (void)p, (void)f; }, "f2", opts);
        fx.make_async([](Pod p) { return Pod{p.a + 1, p.b}; }, "f3", opts);
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
    auto& tokens = FuzzFutures::tokens(w.fx);
    std::uint64_t token = 0;
    try {
        switch (mode % 4) {
            case 0:
            case 1: {  // a request to a registered function, answered to a live token
                if (n < sizeof(detail::RequestHead)) break;
                detail::RequestHead h;
                std::memcpy(&h, p, sizeof h);
                h.fn %= World::kFns;
                h.sig = FuzzFutures::sig(w.fx, h.fn);
                if (mode & 0x80) h.rank = 0;
                token = tokens.add(w.make_state[h.fn]());
                h.token = token;
                std::memcpy(p, &h, sizeof h);
                FuzzFutures::request(w.fx, p, n);
                break;
            }
            case 2: {  // a reply, to a live token of some type half of the time
                if (n >= sizeof(detail::ReplyHead) && (mode & 0x80)) {
                    detail::ReplyHead h;
                    std::memcpy(&h, p, sizeof h);
                    token = tokens.add(w.make_state[(mode >> 2) % World::kFns]());
                    h.token = token;
                    // A body would be waited for forever here (no rank sends it): its
                    // header is parsed, then the call is failed instead of received.
                    if (h.status == detail::reply_body) h.status = detail::reply_error;
                    std::memcpy(p, &h, sizeof h);
                }
                FuzzFutures::reply(w.fx, p, n);
                break;
            }
            default:
                FuzzFutures::fetch(w.fx, p, n);
        }
    } catch (const std::exception&) {
    }
    // Bodies the input announced never come (no rank sends them): their receives are
    // dropped and their owners let go (a call then runs and replies), so each input starts
    // from a clean rank.
    cascade::detail::CommTestAccess::drop_body_receives(w.comm);
    try {
        fuzz::drain(w.comm);
    } catch (const std::exception&) {
    }
    // A token the input did not use up: take its state back.
    if (token)
        if (StateBase* s = tokens.take(token)) s->release();
    return 0;
}

// Must NOT compile: a type without a codec used where values travel between ranks. The
// test suite builds it (one target per NO_CODEC_CASE) and expects the compiler's message to
// name the type and say how to give it a codec.
#include <cascade/cascade.hpp>
#include <memory>
#include <string>

struct Opaque {  // not trivially copyable (a std::string member), no serialize(), no codec
    std::string name;
    std::unique_ptr<int> p;
};

int main() {
    cascade::Communicator comm;
    cascade::Threadpool tp(1, &comm);
#if NO_CODEC_CASE == 1  // active-message argument
    auto* am = comm.make_active_msg([](Opaque&) {});
    (void)am;
#elif NO_CODEC_CASE == 2  // async argument
    cascade::Futures fx(tp, &comm);
    auto f = fx.make_async([](Opaque&) { return 1; });
    (void)f;
#else                     // async result
    cascade::Futures fx(tp, &comm);
    auto f = fx.make_async([](int&) { return Opaque{}; });
    (void)f;
#endif
    tp.join();
}

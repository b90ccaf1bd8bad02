// Fuzz target: decoding the arguments of active messages and large active messages from
// arbitrary bytes (the handlers read every argument). The first byte picks the signature.
// Malformed input must raise WireError, nothing else.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cascade/comm/active_msg.hpp"
#include "cascade/comm/communicator.hpp"  // LargeActiveMsg and its templates

using namespace cascade;

namespace {

struct Pod {
    std::int32_t a;
    double b;
    char c[3];
};

std::uint64_t g_sum = 0;

template <class T>
void touch(const T& x) {
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &x, sizeof(T));
    for (unsigned char b : bytes)
        g_sum += b;
}
template <class Seq>
void touch_all(const Seq& s) {
    for (const auto& x : s)
        touch(x);
    g_sum += s.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static ActiveMsg<int, double> am0([](int& a, double& b) {
        touch(a);
        touch(b);
    });
    static ActiveMsg<view<double>, std::string> am1([](view<double>& v, std::string& s) {
        touch_all(v);
        touch_all(s);
    });
    static ActiveMsg<std::vector<int>, bool, view<const char>> am2(
        [](std::vector<int>& v, bool& b, view<const char>& c) {
            touch_all(v);
            g_sum += b ? 1 : 0;
            touch_all(c);
        });
    static ActiveMsg<Pod, std::vector<Pod>, std::string, view<std::uint8_t>> am3(
        [](Pod& p, std::vector<Pod>& v, std::string& s, view<std::uint8_t>& u) {
            touch(p);
            touch_all(v);
            touch_all(s);
            touch_all(u);
        });
    static ActiveMsg<> am4([] { ++g_sum; });
    static LargeActiveMsg<double, int, view<char>> large(
        [](int& a, view<char>& v) {
            touch(a);
            touch_all(v);
        },
        [](int&, view<char>&) -> double* { return nullptr; }, [](int&, view<char>&) {});
    if (size < 1) return 0;
    // Frame payloads start 8-byte aligned.
    std::vector<std::uint64_t> buf(size / 8 + 1);
    std::memcpy(buf.data(), data + 1, size - 1);
    const char* p = reinterpret_cast<const char*>(buf.data());
    const std::size_t n = size - 1;
    try {
        switch (data[0] % 9) {
            case 0:
                am0.on_frame(0, p, n);
                break;
            case 1:
                am1.on_frame(0, p, n);
                break;
            case 2:
                am2.on_frame(0, p, n);
                break;
            case 3:
                am3.on_frame(0, p, n);
                break;
            case 4:
                am4.on_frame(0, p, n);
                break;
            case 5:
                large.on_body_arrived(p, n);
                break;
            case 6:
                large.on_tree_body_arrived(p, n);
                break;
            case 7:
                (void)large.body_where(p, n);
                break;
            default:
                large.on_body_sent(p, n);
                break;
        }
    } catch (const WireError&) {
    }
    return 0;
}

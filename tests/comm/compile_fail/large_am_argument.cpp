// Must not compile: the small arguments of a large active message are checked like an
// active message's (a std::map has no codec).
#include <map>

#include "cascade/comm/large_active_msg.hpp"

int main() {
    using Map = std::map<int, int>;
    cascade::LargeActiveMsg<double, Map> am([](Map&) {}, [](Map&) -> double* { return nullptr; },
                                            [](Map&) {});
    (void)am;
}

// Must not compile: a view's elements travel as raw bytes.
#include <string>

#include "cascade/comm/active_msg.hpp"

int main() {
    cascade::ActiveMsg<cascade::view<std::string>> am([](cascade::view<std::string>&) {});
    (void)am;
}

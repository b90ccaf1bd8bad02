// GoogleTest main of the tests that run as one process: a hang prints what the pool waits for
// after 60 s (CASCADE_WATCHDOG), well before the test's timeout, unless the environment sets
// the watchdog itself. (A second variable in gtest_discover_tests' ENVIRONMENT property is
// lost: the generated properties flatten the list.)
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
    ::setenv("CASCADE_WATCHDOG", "60", 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}

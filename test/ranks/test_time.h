// Durations in tests, scaled for slow builds, and whether this is a sanitizer build.
// HVD_TEST_TIME_SCALE (a number >= 1, default 1) multiplies what goes through scaled():
// scripts/sanitize.sh sets it, because code under ASAN or TSAN runs several times slower. Scale the
// timeouts a test does not expect to fire and the upper bounds on how long something may take;
// leave alone a short timeout the test expects to fire, and the sleeps that order events. (Tests
// may read the environment; hvd itself reads it only in runtime/config.cc.)
#pragma once

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HVD_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HVD_TEST_SANITIZED 1
#endif

namespace hvd::test {

// Built with ASAN or TSAN (scripts/sanitize.sh): tests may leave out payloads that only repeat
// smaller cases with more bytes, since every byte touched is checked.
#ifdef HVD_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

inline double timeScale() {
  static const double scale = [] {
    const char* v = std::getenv("HVD_TEST_TIME_SCALE");
    if (v == nullptr || *v == '\0') return 1.0;
    char* end = nullptr;
    double s = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(s >= 1.0 && s <= 100.0))
      throw std::invalid_argument(std::string("HVD_TEST_TIME_SCALE='") + v +
                                  "': expected a number from 1 to 100");
    return s;
  }();
  return scale;
}

template <typename Rep, typename Period>
std::chrono::milliseconds scaled(std::chrono::duration<Rep, Period> d) {
  return std::chrono::milliseconds(
      static_cast<long long>(std::chrono::duration<double, std::milli>(d).count() * timeScale()));
}

}  // namespace hvd::test

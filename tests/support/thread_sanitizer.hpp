#pragma once
// HDL_THREAD_SANITIZER is defined in ThreadSanitizer builds (GCC's and clang's spelling), for the
// tests that fork children using the fake runtime, which TSan stops (its mutex is remade there).
#if defined(__SANITIZE_THREAD__)
#define HDL_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HDL_THREAD_SANITIZER 1
#endif
#endif

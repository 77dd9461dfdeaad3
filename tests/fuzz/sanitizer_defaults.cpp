// Default sanitizer options of the executables built with FUSEGEN_SANITIZE (fusegen, the unit
// tests, the fuzz target), compiled in so that ctest, the error catalog's runner and a
// developer's shell all get them; ASAN_OPTIONS / UBSAN_OPTIONS / LSAN_OPTIONS in the
// environment still override them.
//
// abort_on_error: a report ends the process with SIGABRT. The sanitizers' default exit code
// is 1, which is also fusegen's exit code for a spec with errors: the error catalog
// (tests/errors/check_errors.py) would pass a case whose run ended in a leak or UB report
// after printing the expected diagnostics. A signal fails it ("fusegen crashed").
//
// external_symbolizer_path: the llvm-symbolizer CMake found (FUSEGEN_LLVM_SYMBOLIZER; Debian's
// llvm-14 puts it in /usr/lib/llvm-14/bin, off the PATH), for function names and lines.
#ifdef FUSEGEN_LLVM_SYMBOLIZER
#define FUSEGEN_SYMBOLIZER ":external_symbolizer_path=" FUSEGEN_LLVM_SYMBOLIZER
#else
#define FUSEGEN_SYMBOLIZER ""
#endif

extern "C" const char* __asan_default_options() {
  return "abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:"
         "check_initialization_order=1:strict_init_order=1:"
         "strict_string_checks=1" FUSEGEN_SYMBOLIZER;
}

extern "C" const char* __ubsan_default_options() {
  return "abort_on_error=1:print_stacktrace=1" FUSEGEN_SYMBOLIZER;
}

// LeakSanitizer suppressions: only for leaks inside libraries that are not fusegen's. None
// are needed today; add one per library, with the reason, e.g.
//   leak:libclang-cpp.so   // <why: which allocation, and that fusegen does not own it>
extern "C" const char* __lsan_default_suppressions() {
  return "";
}

// Clang's thread-safety analysis (-Wthread-safety) reads these attributes
// and proves at compile time that guarded state is touched only under its
// lock. Other compilers see nothing. One spelling for the whole tree:
//
//   Mutex mutex_;
//   int pending_ KOLO_GUARDED_BY(mutex_);
//   void DrainLocked() KOLO_REQUIRES(mutex_);
//
// std::mutex carries no attributes in libstdc++, so guarded state uses
// kolo::Mutex (common/mutex.h), which does.
#ifndef KOLO_COMMON_THREAD_ANNOTATIONS_H_
#define KOLO_COMMON_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define KOLO_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define KOLO_THREAD_ANNOTATION(x)
#endif

#define KOLO_CAPABILITY(name) KOLO_THREAD_ANNOTATION(capability(name))
#define KOLO_SCOPED_CAPABILITY KOLO_THREAD_ANNOTATION(scoped_lockable)
#define KOLO_GUARDED_BY(x) KOLO_THREAD_ANNOTATION(guarded_by(x))
#define KOLO_PT_GUARDED_BY(x) KOLO_THREAD_ANNOTATION(pt_guarded_by(x))
#define KOLO_ACQUIRED_BEFORE(...) \
  KOLO_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define KOLO_ACQUIRED_AFTER(...) \
  KOLO_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define KOLO_REQUIRES(...) \
  KOLO_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define KOLO_ACQUIRE(...) \
  KOLO_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define KOLO_RELEASE(...) \
  KOLO_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define KOLO_TRY_ACQUIRE(...) \
  KOLO_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define KOLO_EXCLUDES(...) KOLO_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define KOLO_ASSERT_CAPABILITY(x) KOLO_THREAD_ANNOTATION(assert_capability(x))
#define KOLO_RETURN_CAPABILITY(x) KOLO_THREAD_ANNOTATION(lock_returned(x))
// For the rare function whose locking the analysis cannot follow; say why
// beside each use.
#define KOLO_NO_THREAD_SAFETY_ANALYSIS \
  KOLO_THREAD_ANNOTATION(no_thread_safety_analysis)

#endif  // KOLO_COMMON_THREAD_ANNOTATIONS_H_

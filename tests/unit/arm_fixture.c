/* arm_fixture.c: the libraries tests/unit/test_arm.c patches. Built by the Makefile:
 * with -DARM_FIXTURE_DEP as libarmdep.so (defines the function), and without it as
 * libarmfix_now.so / libarmfix_lazy.so (-z now / -z lazy), which import armdep_value through a
 * PLT slot (R_*_JUMP_SLOT: only called) and armdep_other through a GOT slot (R_*_GLOB_DAT: its
 * address is taken, as a library keeping a pointer to cudaLaunchKernel does). Two functions,
 * because once a symbol has a GLOB_DAT slot the compiler calls it through that slot too.
 * With -DARM_FIXTURE_LOADER as libarmload_runpath.so / libarmload_rpath.so: a library that
 * dlopen's a sibling by name (armsub/libarmleaf.so, -DARM_FIXTURE_LEAF) which only its own
 * DT_RUNPATH / DT_RPATH ($ORIGIN/armsub) finds, as torch finds its pip CUDA libraries. */
#if defined(ARM_FIXTURE_LEAF)
__attribute__((visibility("default"))) int armleaf_value(void) { return 42; }
#elif defined(ARM_FIXTURE_LOADER)
#include <dlfcn.h>
__attribute__((visibility("default"))) void *armload_open(const char *name) { return dlopen(name, RTLD_NOW); }
#elif defined(ARM_FIXTURE_DEP)
__attribute__((visibility("default"))) int armdep_value(int x) { return x + 1; }
__attribute__((visibility("default"))) int armdep_other(int x) { return x + 2; }
#else
int armdep_value(int x);
int armdep_other(int x);
__attribute__((visibility("default"))) int armfix_call(int x) { return armdep_value(x); }
__attribute__((visibility("default"))) int (*armfix_ptr(void))(int) { return armdep_other; }
#endif

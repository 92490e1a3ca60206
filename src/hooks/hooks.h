/* hooks.h: the hooks layer (src/hooks/): the ways into the library (interposed CUDA entry
 * points, CUPTI callbacks, late arming, the torch.compile check entry, the Python bootstrap)
 * and lg.c's life cycle above them. Declares what these files share; includes core.h, so a
 * hooks file sees every layer below. Nothing below includes it. Tests that drive the library
 * as the hooks do include it too (tests/unit). See src/README.md for the layers. */
#ifndef LG_HOOKS_H
#define LG_HOOKS_H
#include "core/core.h"

/* ---------------------------------------------------------------- pyboot.c */

enum {
    LG_PYBOOT_NOT_PYTHON, /* no CPython in the process */
    LG_PYBOOT_LATE,       /* loaded into a running interpreter (enable(), attach) */
    LG_PYBOOT_ON_PATH,    /* preloaded: labelguard/_bootstrap is first on PYTHONPATH */
    LG_PYBOOT_NO_DIR,     /* preloaded, but no bootstrap directory next to the library */
    LG_PYBOOT_NO_SITE,    /* preloaded into python -E, -I or -S: the bootstrap cannot run */
};
/* From the constructor, with the process's argc/argv: in a Python interpreter that has not
 * started, labelguard/_bootstrap first on PYTHONPATH (and what it was in
 * LABELGUARD_PYTHONPATH_WAS, for the bootstrap to restore). */
LG_HIDDEN void lg_pyboot_constructor(int argc, char *const *argv);
/* Python's options that keep the bootstrap from running, read from a command line the way
 * CPython reads it (combined letters, -W/-X values, -c/-m ending the options): a mask of these. */
enum { LG_PYBOOT_IGNORE_ENV = 1, LG_PYBOOT_NO_SITE_CUSTOM = 2 };
LG_HIDDEN int lg_pyboot_argv_flags(int argc, char *const *argv);
/* PYTHONPATH with the bootstrap directory found next to the library at lib_path (a real path)
 * first: 1 with it in out, 0 when old already has a labelguard/_bootstrap entry, -1 when no
 * directory qualifies (exists(dir, ctx) false for both layouts) or out is too small. */
LG_HIDDEN int lg_pyboot_pythonpath(const char *lib_path, const char *old, bool (*exists)(const char *dir, void *ctx),
                                   void *ctx, char *out, size_t cap);
/* LG_PYBOOT_*, as the constructor found the process. */
LG_HIDDEN int lg_pyboot_state(void);
/* The bootstrap will arm the check in this interpreter: on PYTHONPATH, and neither -E, -I nor -S. */
LG_HIDDEN bool lg_pyboot_expected(void);
/* ---------------------------------------------------------------- api_check.c */

/* The start event's `compiled` line: how torch.compile'd losses are checked (or that they are
 * not, LABELGUARD_COMPILED=off). */
LG_HIDDEN const char *lg_api_check_way(void);
/* ---------------------------------------------------------------- api_index.c */

/* The made-up kernel of index op `kind` (LABELGUARD_INDEX_*, include/labelguard.h): its spec
 * (family, direction, eager negative-id rule, why mask cannot run it); NULL for another kind. */
/* A made-up kernel entry of the torch.compile checks (this file's and api_check.c's losses):
 * spec, names, int64 ids, published as watched. */
LG_HIDDEN void lg_api_index_publish(lg_kernel_info_t *k, const lg_spec_t *s, const char *mangled,
                                    const char *short_name);
LG_HIDDEN lg_kernel_info_t *lg_api_index_info(int kind);
/* Which operand of its range kernel `kind` checks: 1 for BCE's target, else 0 (its input). */
LG_HIDDEN int lg_api_index_operand(int kind);
/* ---------------------------------------------------------------- preload.c */

/* The interposed entry points (for late arming by GOT patching, arm.c): name, our function,
 * and where the real one is stored once resolved. */
typedef struct lg_hook {
    const char *name;
    void *replacement;
    void **real;
} lg_hook_t;
LG_HIDDEN const lg_hook_t *lg_preload_hooks(int *count);
/* Set while the interposition layer handles a launch, so that CUPTI skips it. */
extern LG_HIDDEN LG_TLS int lg_preload_in_launch;
/* ---------------------------------------------------------------- cupti_launch.c */

/* Fills l from the params of one launch callback (dom: a CUpti_CallbackDomain, data: its
 * CUpti_CallbackData; name_fn: libcuda's cuFuncGetName or NULL) and *args_slot with where the
 * launch's argument array lives; false for a callback that is no launch, or a launch with no
 * args array (a driver launch passing its parameters through `extra` only: nothing to decode). */
LG_HIDDEN bool lg_cupti_launch_read(int dom, uint32_t cbid, const void *data, void *name_fn, lg_launch_t *l,
                                    void ***args_slot);
/* ---------------------------------------------------------------- cupti_slot.c */

/* Whether the start subscribes to CUPTI, and why (for the start event). */
LG_HIDDEN bool lg_cupti_slot_wanted(bool interposable, char *why, size_t why_len);
/* The cuptiSubscribe and cuptiSubscribe_v2 entries of late arming's hook set (names only, and
 * where the bound function is kept; arm.c fills in our exported definitions): a profiler's call
 * then reaches the hand-over wrappers as under LD_PRELOAD. Returns the count (2). */
LG_HIDDEN int lg_cupti_slot_hooks(lg_hook_t *out, int cap);
/* Subscribes cb (a CUpti_CallbackFunc) into *out (a CUpti_SubscriberHandle) through the libcupti
 * handle `cupti` (v2 with our name where it exists and no v1 client was seen, falling back to
 * the single slot and to v1); returns the last CUptiResult (lg_cupti_slot_how: each attempt).
 * stop: called before the slot is given up for a profiler (it turns cb into an immediate
 * return), so this file never calls back into cupti.c. */
LG_HIDDEN int lg_cupti_slot_take(void *cupti, void *cb, void (*stop)(void), void **out);
/* The subscribe attempts of the last lg_cupti_slot_take and their answers ("" if CUPTI was
 * not tried), for the start event. */
LG_HIDDEN const char *lg_cupti_slot_how(void);
/* The holder CUPTI named when the slot was taken ("" if it named none). */
LG_HIDDEN const char *lg_cupti_slot_holder(void);
/* Fork child: a fresh lock (lg.c's atfork handler). */
LG_HIDDEN void lg_cupti_slot_after_fork(void);
/* ---------------------------------------------------------------- cupti.c */

LG_HIDDEN void lg_cupti_start(void);
LG_HIDDEN bool lg_cupti_active(void);
/* After the start event: the cupti_unavailable warning, if CUPTI could not be used. */
LG_HIDDEN void lg_cupti_report_status(void);
/* From lg.c's fork handler: this process is a fork child; CUPTI is never called in it (a child
 * forked while a parent thread was inside cuptiSubscribe re-runs the start and spins forever). */
LG_HIDDEN void lg_cupti_after_fork_child(void);
/* ---------------------------------------------------------------- arm.c */

/* From lg.c's start, after the start event: what arming left for the start (a warning about
 * slots it could not write; graphs instantiated before arming, under attach). */
LG_HIDDEN void lg_arm_after_start(void);
/* ---------------------------------------------------------------- arm_dlopen.c */

/* The `dlopen` entry of late arming's hook set: our wrapper, and where the function the
 * patched slots pointed at is kept. */
LG_HIDDEN void lg_arm_dlopen_hook(lg_hook_t *out);
/* ---------------------------------------------------------------- arm_objects.c */

/* The loaded objects, listed into a fixed table (one dl_iterate_phdr under the loader lock);
 * returns the count, the loader's load and unload counts, and whether the table was too small.
 * The table and everything below are read under arm_got.c's lock. No allocation, no stdio, no
 * loader call but the walk: safe inside a debugger's call. */
LG_HIDDEN int lg_arm_objects_list(unsigned long long *adds, unsigned long long *subs, bool *cut);
/* The i-th object of the last listing (NULL past its end). */
LG_HIDDEN const struct dl_phdr_info *lg_arm_objects_at(int i);
/* Whether addr lies in a loaded segment of info. */
LG_HIDDEN bool lg_arm_objects_contains(const struct dl_phdr_info *info, uintptr_t addr);
/* The listed object that holds addr; -1 if none. */
LG_HIDDEN int lg_arm_objects_find(uintptr_t addr);
/* For the i-th object: 0 if it is no libcudart, its major (12, 13), -1 if one of unknown major. */
LG_HIDDEN int lg_arm_objects_cudart_major(int i);
/* How many libcudart majors the listing holds; *first: the first one listed (0 if none). */
LG_HIDDEN int lg_arm_objects_majors(int *first);
/* Whether a listed object's file name begins with prefix ("libcuda.so"). */
LG_HIDDEN bool lg_arm_objects_named(const char *prefix);
/* The address of info's definition of name at version (NULL: its default), from its own hash
 * table; NULL if it defines none (IFUNCs are not resolved). */
LG_HIDDEN void *lg_arm_objects_lookup(const struct dl_phdr_info *info, const char *name, const char *version);
/* The version (and in *file the library that must provide it) that info's symbol index sym
 * asks for; NULL when it asks none. */
LG_HIDDEN const char *lg_arm_objects_wanted(const struct dl_phdr_info *info, uint32_t sym, const char **file);
/* The listed object whose file name or SONAME is soname; -1 if none. */
LG_HIDDEN int lg_arm_objects_by_soname(const char *soname);
/* The PROT_* of the mapping holding addr (-1: unknown), from /proc/self/maps read once (open,
 * read) until lg_arm_objects_forget_maps. */
LG_HIDDEN int lg_arm_objects_prot(uintptr_t addr);
LG_HIDDEN void lg_arm_objects_forget_maps(void);
/* ---------------------------------------------------------------- arm_got.c */

/* In every object loaded now except the one holding this code and libcudart, rewrites the GOT
 * slots (JUMP_SLOT, GLOB_DAT) of the names in hooks[] to point at their replacement, first
 * storing the bound function in *real if still NULL. A slot already pointing into the object
 * holding this code (a preloaded library's per-version hook) is counted and left as it is.
 * Returns the slots pointing at a replacement or into this object afterwards and their object
 * count in n_objects; -1 when nothing could be armed. Takes no lock, remembers nothing. */
LG_HIDDEN int lg_arm_got_patch(const lg_hook_t *hooks, int n_hooks, int *n_objects);
/* The lock enable and every walk hold (labelguard_arm only tries it: a debugger's call never
 * waits). */
LG_HIDDEN void lg_arm_got_lock(void);
LG_HIDDEN bool lg_arm_got_trylock(void);
LG_HIDDEN void lg_arm_got_unlock(void);
/* Under the lock: patches every loaded object with hooks[] (the first n_counted counted in the
 * result, as lg_arm_got_patch counts), remembers them, and keeps hooks[] (static storage) for
 * the walks later dlopens ask for. majors[i] (static too): the libcudart major hooks[i] is the
 * copy for, 0 for a hook of no runtime (dlopen, CUPTI); a slot gets the copy of the runtime it
 * calls, one it cannot tell (two runtimes loaded) is left alone (arm_runtime_unknown). */
LG_HIDDEN int lg_arm_got_walk_all(const lg_hook_t *hooks, const int *majors, int n_hooks, int n_counted,
                                  int *n_objects);
/* From now on each dlopen that loads something walks the new objects. */
LG_HIDDEN void lg_arm_got_armed(void);
/* Without the lock: serves the walks dlopens asked for while it was taken (trylock; returns
 * the slots armed). */
LG_HIDDEN int lg_arm_got_requests(void);
/* From the dlopen wrapper (arm_dlopen.c), after a dlopen that loaded something: once armed,
 * patches the objects no walk has patched yet. Returns the slots armed in them (0 when not
 * armed, or when another thread holds the lock: that thread walks again for it before it lets
 * go). Never waits for the lock. */
LG_HIDDEN int lg_arm_got_loaded(void);
/* The arm_incomplete warning, once per new count of GOT slots a walk could not write. Not
 * from a debugger's call (it writes the log). */
LG_HIDDEN void lg_arm_got_say_failed(void);
/* From lg.c's fork handler: the child starts with the lock free and no request pending. */
LG_HIDDEN void lg_arm_got_atfork_child(void);

#endif /* LG_HOOKS_H */

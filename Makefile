# labelguard Makefile (hand-written). `make` builds build/liblabelguard.so; `make test` runs every
# GPU-free test and ends with "N passed, N failed"; `make test-gpu` needs a GPU (exit 77 without).
# SANITIZER=address|undefined|thread|address+undefined builds everything into build-$(SANITIZER)/
# instead (address+undefined: both in one build, one test pass; what CI runs). V=1: loud.

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
CC ?= gcc
PREFIX ?= /usr/local
DESTDIR ?=
PKG_CONFIG ?= pkg-config
OBJDUMP ?= objdump
OBJCOPY ?= objcopy

# ARCH=aarch64 on an x86_64 host cross-builds into build-aarch64/ with Debian's
# gcc-aarch64-linux-gnu, against a Debian 12 arm64 tree (scripts/arm64-root.sh: made once, cached
# outside the checkout) that gives the static glib, pcre2 and LLVM libunwind, and in which qemu-user
# runs the tests. The validator fatbin is built by the host's nvcc for the GPU alone: the same
# bytes whatever the host CPU (tests/qemu/test_build.sh compares the two builds').
HOST_ARCH := $(shell uname -m)
ARCH ?= $(HOST_ARCH)
CROSS :=
ifneq ($(ARCH),$(HOST_ARCH))
ifneq ($(ARCH)-$(HOST_ARCH),aarch64-x86_64)
$(error ARCH=$(ARCH): only aarch64 is cross-built, on an x86_64 host)
endif
CROSS := aarch64
ifneq ($(SANITIZER),)
$(error SANITIZER with ARCH=$(ARCH): the sanitizer suites run natively only)
endif
CROSS_COMPILE ?= aarch64-linux-gnu-
CC := $(CROSS_COMPILE)gcc
CXX := $(CROSS_COMPILE)g++
BUILD ?= build-aarch64
ifeq ($(filter clean uninstall,$(MAKECMDGOALS)),)
ifeq ($(shell command -v $(CC)),)
$(error $(CC) not found: install the Debian packages gcc-aarch64-linux-gnu g++-aarch64-linux-gnu)
endif
ARM64_ROOT := $(shell bash scripts/arm64-root.sh)
ifeq ($(wildcard $(ARM64_ROOT)/.installed),)
$(error the arm64 tree could not be made (scripts/arm64-root.sh, output above))
endif
endif
ARM64_LIBDIR := $(ARM64_ROOT)/usr/lib/aarch64-linux-gnu
PKG_CONFIG := PKG_CONFIG_SYSROOT_DIR=$(ARM64_ROOT) PKG_CONFIG_LIBDIR=$(ARM64_LIBDIR)/pkgconfig:$(ARM64_ROOT)/usr/share/pkgconfig pkg-config
UNWIND_STATIC := $(ARM64_ROOT)/usr/lib/llvm-14/lib/libunwind.a
UNWIND_INC := -idirafter $(ARM64_ROOT)/usr/include/libunwind
export OBJDUMP := $(CROSS_COMPILE)objdump
export OBJCOPY := $(CROSS_COMPILE)objcopy
endif

ifeq ($(SANITIZER),)
BUILD ?= build
SAN_FLAGS :=
else
BUILD ?= build-$(SANITIZER)
SAN_LIST := $(subst +, ,$(SANITIZER))
SAN_FLAGS := $(foreach s,$(SAN_LIST),-fsanitize=$(s)) -fno-omit-frame-pointer
endif
# TSan does not model atomic_thread_fence (gcc: -Wtsan); the one fence, in validate.c's ring
# read of GPU-written pinned memory, is on the GPU path, which TSan runs never take.
ifeq ($(SANITIZER),thread)
SAN_FLAGS += -Wno-tsan
endif

ifeq ($(V),1)
Q :=
say = @true
else
Q := @
say = @printf '  %-8s %s\n' $(1) $(2)
endif

# --- dependencies: one line naming the Debian package when something is missing -----------
ifeq ($(filter clean uninstall,$(MAKECMDGOALS)),)
ifeq ($(shell $(PKG_CONFIG) --version 2>/dev/null),)
$(error pkg-config not found: install the Debian package pkg-config (apt-get install pkg-config))
endif
ifeq ($(shell $(PKG_CONFIG) --exists glib-2.0 && echo yes),)
$(error glib-2.0 development files not found: install the Debian package libglib2.0-dev)
endif
ifeq ($(wildcard $(UNWIND_STATIC))$(wildcard /usr/include/libunwind/libunwind.h),)
$(error libunwind (static, PIC) not found: install the Debian package libunwind-14-dev)
endif
ifeq ($(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),)
$(error CUDA headers not found under CUDA_HOME=$(CUDA_HOME): install the CUDA toolkit or set CUDA_HOME)
endif
ifeq ($(wildcard $(CUDA_HOME)/include/cupti.h)$(wildcard $(CUDA_HOME)/extras/CUPTI/include/cupti.h),)
$(error CUPTI headers not found under CUDA_HOME=$(CUDA_HOME): install the CUDA toolkit's CUPTI component)
endif
endif

GLIB_CFLAGS := $(shell $(PKG_CONFIG) --cflags glib-2.0 2>/dev/null)
GLIB_LIBS := $(shell $(PKG_CONFIG) --libs glib-2.0 2>/dev/null)
# Static glib inside the library: `ldd` must show libc alone (STYLE.md, Hooks).
GLIB_STATIC := $(shell $(PKG_CONFIG) --static --libs-only-l glib-2.0 2>/dev/null | sed 's/-pthread//g; s/-lm//g')
ifneq ($(CROSS),)
# The arm64 tree's archives by path: a -L into it would also hand the link its libc.
GLIB_STATIC := $(patsubst -l%,$(ARM64_LIBDIR)/lib%.a,$(GLIB_STATIC))
# The unit tests link glib's shared library, as natively (test_stack unwinds through it).
GLIB_LIBS := $(ARM64_LIBDIR)/libglib-2.0.so.0 -Wl,-rpath-link,$(ARM64_LIBDIR) -pthread
endif
# libunwind's local unwinder, static with hidden symbols like glib: a shared libunwind would
# export the unversioned _Unwind_* functions and take over the host's C++ exceptions. LLVM's
# (Debian libunwind-14-dev): its libunwind.a is position-independent, libunwind-dev's is not
# and cannot go into a shared object.
UNWIND_STATIC ?= /usr/lib/llvm-14/lib/libunwind.a
UNWIND_INC ?= -idirafter /usr/include/libunwind
CUDA_INC := -I$(CUDA_HOME)/include -I$(CUDA_HOME)/extras/CUPTI/include

STD := -std=c11 -D_GNU_SOURCE
WARN := -Wall -Wextra -Werror -Wno-unused-parameter
OPT := -O2
DEBUG := -g
FINAL_CFLAGS = $(STD) $(WARN) $(OPT) $(DEBUG) -fPIC -fvisibility=hidden -MMD -MP -ffile-prefix-map=$(CURDIR)=. \
               $(if $(CROSS),-ffile-prefix-map=$(ARM64_ROOT)/=/) \
               $(GLIB_CFLAGS) $(UNWIND_INC) $(CUDA_INC) -Iinclude -Isrc -Icuda $(SAN_FLAGS) $(if $(PIN_GLIBC),-DLG_PIN_GLIBC) $(CFLAGS)
FINAL_LDFLAGS = $(SAN_FLAGS) $(LDFLAGS)

# Every architecture CUDA 13 builds for, plus PTX of the lowest for anything newer.
CUDA_ARCHS ?= 75 80 86 87 88 89 90 100 103 110 120 121
# The validator must load on the oldest driver a supported PyTorch runs on, and CUDA 13's
# images do not: its cubins use ELF ABI 8 and its PTX says ISA 9.0, which need R580, while
# CUDA 12 builds of torch run on R525 and up. So the PTX is declared at ISA VALIDATOR_PTX_ISA
# (CUDA 10.2's; ptxas 12.0 assembling it proves no later instruction is used), sm_75..sm_90
# are assembled by CUDA 12.0's ptxas, sm_100..sm_121 by CUDA 12.9's (the first to know them),
# and only what CUDA 12 has no name for (sm_88, sm_110) by the toolkit's own.
# scripts/fetch-ptxas.sh fetches the old assemblers (pip, cached) into third_party/ptxas/.
VALIDATOR_PTX_ISA := 6.5
PTXAS_12_0 := 12.0.76
PTXAS_12_9 := 12.9.86
SASS_BY_12_0 := $(filter 75 80 86 87 89 90,$(CUDA_ARCHS))
SASS_BY_12_9 := $(filter 100 103 120 121,$(CUDA_ARCHS))
SASS_BY_13 := $(filter-out $(SASS_BY_12_0) $(SASS_BY_12_9),$(CUDA_ARCHS))
# PTX for the lowest architecture: any newer GPU can JIT it.
PTX_ARCH := 75

LIB := $(BUILD)/liblabelguard.so
# src/ is one folder per layer (src/README.md); the objects stay in one flat folder (each file
# name is unique: the layer test checks it).
LIB_SRCS := $(sort $(wildcard src/*/*.c))
LIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(notdir $(LIB_SRCS)))
vpath %.c $(sort $(dir $(LIB_SRCS)))
FATBIN := $(BUILD)/validate.fatbin
FATBIN_OBJ := $(BUILD)/obj/validate_fatbin.o

FAKE_DIR := $(BUILD)/fakecuda
FAKE_LIB := $(FAKE_DIR)/libcudart.so.13
FAKE_SRCS := $(sort $(wildcard tests/fakecuda/*.c))
# The same double as libcudart.so.12 (version node libcudart.so.12), for CUDA 12 builds of torch.
FAKE12_DIR := $(BUILD)/fakecuda12
FAKE12_LIB := $(FAKE12_DIR)/libcudart.so.12

UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRCS))

# Test programs: each tests/progs/NAME.cu gives three binaries: NAME (<<<>>> through
# __cudaLaunchKernel), NAME_legacy (cudaLaunchKernel with the host stub, as CUDA 12 builds of
# PyTorch launch) and NAME_ptsz (--default-stream per-thread). libNAME.cu gives a shared library.
PROG_SRCS := $(sort $(filter-out tests/progs/lib%,$(wildcard tests/progs/*.cu)))
PROG_BINS := $(foreach p,$(PROG_SRCS),$(patsubst tests/progs/%.cu,$(BUILD)/progs/%,$(p)) \
               $(patsubst tests/progs/%.cu,$(BUILD)/progs/%_legacy,$(p)) \
               $(patsubst tests/progs/%.cu,$(BUILD)/progs/%_ptsz,$(p)))
PROG_LIB_SRCS := $(sort $(wildcard tests/progs/lib*.cu))
PROG_LIBS := $(patsubst tests/progs/%.cu,$(BUILD)/progs/%.so,$(PROG_LIB_SRCS))
PROG_C_SRCS := $(sort $(wildcard tests/progs/*.c))
PROG_C_BINS := $(patsubst tests/progs/%.c,$(BUILD)/progs/%,$(PROG_C_SRCS))
NVCC_PROG := $(NVCC) -cudart shared -arch=sm_80 -std=c++17 -O1 -g -Itests/progs $(foreach s,$(SAN_LIST),-Xcompiler -fsanitize=$(s))
ifneq ($(CROSS),)
# nvcc compiles the host code with the cross g++ (the x86_64 target's CUDA headers serve: they
# are the same for aarch64) and links against the double's runtime, there being no aarch64
# libcudart here.
NVCC_PROG := $(NVCC) -ccbin $(CXX) -cudart none -I$(CUDA_HOME)/targets/x86_64-linux/include \
             -isystem $(CUDA_HOME)/targets/x86_64-linux/include/cccl -arch=sm_80 -std=c++17 -O1 -g -Itests/progs \
             -L$(FAKE_DIR) -l:libcudart.so.13
endif

.PHONY: all test test-stress test-gpu bench demo install uninstall clean fuzz test-programs wheel
all: $(LIB)
# A cross build's default goal includes the runtime test double its qemu tests run on.
ifneq ($(CROSS),)
all: $(FAKE_LIB)
endif

# An object built before src/ had layer folders names its source at the old path in its .d
# file: that path is remade by nothing, so the object is rebuilt from its new one.
src/%.c: ;

$(BUILD)/obj/%.o: %.c
	$(call say,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(FINAL_CFLAGS) -c $< -o $@

VDIR := $(BUILD)/validator
$(VDIR)/validate.ptx: cuda/validate.cu cuda/lg_scan.h cuda/lg_validate.h
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC) -ptx -O3 -arch=compute_$(PTX_ARCH) -Icuda -o $@.tmp $<
	$(Q)grep -q '^\.version [0-9.]*$$' $@.tmp || { echo "$@: no .version line in nvcc's PTX" >&2; exit 1; }
	$(Q)sed 's/^\.version [0-9.]*$$/.version $(VALIDATOR_PTX_ISA)/' $@.tmp > $@ && rm -f $@.tmp
third_party/ptxas/%/bin/ptxas:
	$(call say,FETCH,ptxas $*)
	$(Q)scripts/fetch-ptxas.sh $* >/dev/null
# Everything the build fetches, for a machine without network: run here, carry third_party/.
fetch-tools: third_party/ptxas/$(PTXAS_12_0)/bin/ptxas third_party/ptxas/$(PTXAS_12_9)/bin/ptxas
.PHONY: fetch-tools
# One rule per assembler; the PTX is the same for all, so every image runs the same code.
$(foreach a,$(SASS_BY_12_0),$(VDIR)/sm_$(a).cubin): $(VDIR)/sm_%.cubin: $(VDIR)/validate.ptx third_party/ptxas/$(PTXAS_12_0)/bin/ptxas
	$(call say,PTXAS,$@)
	$(Q)third_party/ptxas/$(PTXAS_12_0)/bin/ptxas -O3 -arch=sm_$* -o $@ $<
$(foreach a,$(SASS_BY_12_9),$(VDIR)/sm_$(a).cubin): $(VDIR)/sm_%.cubin: $(VDIR)/validate.ptx third_party/ptxas/$(PTXAS_12_9)/bin/ptxas
	$(call say,PTXAS,$@)
	$(Q)third_party/ptxas/$(PTXAS_12_9)/bin/ptxas -O3 -arch=sm_$* -o $@ $<
$(foreach a,$(SASS_BY_13),$(VDIR)/sm_$(a).cubin): $(VDIR)/sm_%.cubin: $(VDIR)/validate.ptx
	$(call say,PTXAS,$@)
	$(Q)$(CUDA_HOME)/bin/ptxas -O3 -arch=sm_$* -o $@ $<
# Uncompressed: an old driver need not know the compression a new fatbinary picks.
$(FATBIN): $(VDIR)/validate.ptx $(foreach a,$(CUDA_ARCHS),$(VDIR)/sm_$(a).cubin)
	$(call say,FATBIN,$@)
	$(Q)$(CUDA_HOME)/bin/fatbinary -64 --compress=false --create=$@ \
	  $(foreach a,$(CUDA_ARCHS),--image3=kind=elf,sm=$(a),file=$(VDIR)/sm_$(a).cubin) \
	  --image3=kind=ptx,sm=$(PTX_ARCH),file=$<

# The PTX alone too (NUL-terminated text), for a driver that refuses the fatbin's images.
$(FATBIN_OBJ): $(FATBIN) $(VDIR)/validate.ptx
	$(call say,EMBED,$<)
	@mkdir -p $(dir $@)
	$(Q)printf '.section .rodata\n.balign 64\n.globl lg_validator_fatbin\n.hidden lg_validator_fatbin\nlg_validator_fatbin:\n.incbin "%s"\n.byte 0\n.globl lg_validator_fatbin_end\n.hidden lg_validator_fatbin_end\nlg_validator_fatbin_end:\n.balign 8\n.globl lg_validator_ptx\n.hidden lg_validator_ptx\nlg_validator_ptx:\n.incbin "%s"\n.byte 0\n.section .note.GNU-stack,"",@progbits\n' $(FATBIN) $(VDIR)/validate.ptx > $(BUILD)/obj/validate_fatbin.S
	$(Q)$(CC) -c $(BUILD)/obj/validate_fatbin.S -o $@

# The built-in kernel spec table (registry.c parses it at start), embedded like the fatbin.
SPECS_OBJ := $(BUILD)/obj/builtin_specs.o
$(SPECS_OBJ): specs/pytorch.conf
	$(call say,EMBED,$<)
	@mkdir -p $(dir $@)
	$(Q)printf '.section .rodata\n.balign 8\n.globl lg_builtin_specs\n.hidden lg_builtin_specs\nlg_builtin_specs:\n.incbin "%s"\n.globl lg_builtin_specs_end\n.hidden lg_builtin_specs_end\nlg_builtin_specs_end:\n.byte 0\n.section .note.GNU-stack,"",@progbits\n' specs/pytorch.conf > $(BUILD)/obj/builtin_specs.S
	$(Q)$(CC) -c $(BUILD)/obj/builtin_specs.S -o $@

# The library needs nothing newer than glibc $(GLIBC_BASELINE) (the wheel's manylinux2014 tag), though
# it is built on a newer one: src/glibc.c defines what 2.28 lacks, and on x86_64 the link is done
# twice, the second time with trampolines (scripts/glibc-pin.sh) binding every newer symbol
# version to the oldest one glibc keeps. libpthread.so.0 and libdl.so.2 are needed explicitly:
# on glibc < 2.34 that is where pthread_create and dlopen live. Sanitizer builds are not pinned
# and get no shims (LG_PIN_GLIBC unset): their runtimes intercept the current versions, and the
# shims beside the TSan runtime leave empty PLT relocations that the loader refuses.
GLIBC_BASELINE := 2.17
LIB_INPUTS = $(LIB_OBJS) $(FATBIN_OBJ) $(SPECS_OBJ)
link_lib = $(CC) -shared -o $(1) $(2) -Wl,--version-script=src/exports.map $(FINAL_LDFLAGS) -Wl,-Bstatic $(GLIB_STATIC) -Wl,-Bdynamic $(UNWIND_STATIC) \
	-Wl,--exclude-libs,ALL -Wl,-z,defs -Wl,-z,nodelete -Wl,-Bsymbolic-functions -pthread -Wl,--no-as-needed -l:libpthread.so.0 -l:libdl.so.2 -Wl,--as-needed -ldl -lm
PIN_GLIBC := $(if $(SANITIZER),,$(filter x86_64 aarch64,$(ARCH)))
ifneq ($(PIN_GLIBC),)
$(BUILD)/obj/unpinned.so: $(LIB_INPUTS) src/exports.map
	$(Q)$(call link_lib,$@,$(LIB_INPUTS))
$(BUILD)/obj/glibc_pin.S: $(BUILD)/obj/unpinned.so scripts/glibc-pin.sh
	$(Q)bash scripts/glibc-pin.sh $< $(GLIBC_BASELINE) $@ $(shell $(CC) -print-file-name=libc.so.6) $(shell $(CC) -print-file-name=libm.so.6)
$(BUILD)/obj/glibc_pin.o: $(BUILD)/obj/glibc_pin.S
	$(Q)$(CC) -c $< -o $@
$(LIB): $(LIB_INPUTS) $(BUILD)/obj/glibc_pin.o src/exports.map
	$(call say,LINK,$@)
	$(Q)$(call link_lib,$@.tmp,$(LIB_INPUTS) $(BUILD)/obj/glibc_pin.o)
	$(Q)newest=$$($(OBJDUMP) -T $@.tmp | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n1); \
	  if [ "$$(printf '%s\n' "$$newest" $(GLIBC_BASELINE) | sort -V | tail -n1)" != $(GLIBC_BASELINE) ]; then \
	    echo "$@: needs GLIBC_$$newest, newer than the baseline $(GLIBC_BASELINE):" >&2; \
	    $(OBJDUMP) -T $@.tmp | grep "GLIBC_$$newest" >&2; rm -f $@.tmp; exit 1; fi
	$(Q)mv $@.tmp $@
else
$(LIB): $(LIB_INPUTS) src/exports.map
	$(call say,LINK,$@)
	$(Q)$(call link_lib,$@,$(LIB_INPUTS))
endif

# --- the runtime test double -------------------------------------------------------------
# Its export list is the real runtime's (tests/fakecuda/exports-<major>.txt, made by
# gen_exports.sh); gen_stubs.sh turns it into the version script and weak NotSupported stubs for
# what fakecudart.c does not define.
FAKE_DEPS := $(FAKE_SRCS) $(wildcard tests/fakecuda/*.h) cuda/lg_scan.h tests/fakecuda/gen_stubs.sh
define fake_rule # $(1) major, $(2) output dir
$(2)/libcudart.map $(2)/stubs.c &: tests/fakecuda/exports-$(1).txt tests/fakecuda/gen_stubs.sh
	@mkdir -p $(2)
	$(Q)bash tests/fakecuda/gen_stubs.sh $$< $(2)/libcudart.map $(2)/stubs.c
$(2)/libcudart.so.$(1): $(FAKE_DEPS) $(2)/libcudart.map $(2)/stubs.c
	$$(call say,LINK,$$@)
	$(Q)$(CC) $(STD) $(WARN) -O1 -g -fPIC -shared $(CUDA_INC) -Itests/fakecuda $(SAN_FLAGS) -DFK_CUDA_MAJOR=$(1) \
		-Wl,-soname,libcudart.so.$(1) -Wl,--version-script=$(2)/libcudart.map -Wl,-Bsymbolic \
		-o $$@ $(FAKE_SRCS) $(2)/stubs.c -pthread -ldl -lm
	$(Q)ln -sf libcudart.so.$(1) $(2)/libcudart.so
endef
$(eval $(call fake_rule,13,$(FAKE_DIR)))
$(eval $(call fake_rule,12,$(FAKE12_DIR)))
test-programs: $(FAKE12_LIB)
# The driver-API half real torch needs to start (tests/fakecuda/driver/libcuda.c); in a directory
# of its own so that only build/torch-python puts it on the library path.
FAKE_DRIVER := $(BUILD)/fakecuda-driver/libcuda.so.1
$(FAKE_DRIVER): tests/fakecuda/driver/libcuda.c
	$(call say,LINK,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) -O1 -g -fPIC -shared -fvisibility=hidden $(CUDA_INC) $(SAN_FLAGS) \
		-Wl,-soname,libcuda.so.1 -o $@ $< -ldl

# Real torch on the double (tests/torch-fake/): installs the pinned wheels (pip, cached outside
# the checkout) and writes the wrapper. `make test` depends on it; a failed install fails.
TORCH_PY := $(BUILD)/torch-python
$(TORCH_PY): tests/torch-fake/install.sh tests/torch-fake/torch-python.in tests/torch-fake/pins-13.txt \
             tests/torch-fake/pins-12.txt $(FAKE_LIB) $(FAKE12_LIB) $(FAKE_DRIVER)
	$(call say,TORCH,$@)
	$(Q)CUDA_HOME=$(CUDA_HOME) bash tests/torch-fake/install.sh wrapper $@ $(abspath $(FAKE_LIB)) $(abspath $(FAKE12_LIB)) $(abspath $(FAKE_DRIVER))
test-programs: $(TORCH_PY)

$(BUILD)/progs/%: tests/progs/%.cu $(wildcard tests/progs/*.h tests/progs/*.cuh)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) -o $@ $<
$(BUILD)/progs/%_legacy: tests/progs/%.cu $(wildcard tests/progs/*.h tests/progs/*.cuh)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) -DLG_TEST_LEGACY_LAUNCH=1 -o $@ $<
$(BUILD)/progs/%_ptsz: tests/progs/%.cu $(wildcard tests/progs/*.h tests/progs/*.cuh)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) --default-stream per-thread -o $@ $<
$(BUILD)/progs/lib%.so: tests/progs/lib%.cu $(wildcard tests/progs/*.h tests/progs/*.cuh)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) -shared -Xcompiler -fPIC -o $@ $<
$(BUILD)/progs/%: tests/progs/%.c
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) -O1 -g $(SAN_FLAGS) -Iinclude -o $@ $< -pthread -ldl

test-programs: $(LIB) $(FAKE_LIB) $(PROG_BINS) $(PROG_LIBS) $(PROG_C_BINS) $(UNIT_BINS) $(BUILD)/demo/demo_train

# --- unit tests: GTest binaries linking the library's objects directly --------------------
# Linked against an archive of the objects, so a test pulls in only the modules it uses.
LIB_ARCHIVE := $(BUILD)/obj/liblg.a
$(LIB_ARCHIVE): $(LIB_OBJS) $(FATBIN_OBJ) $(SPECS_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^
$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB_ARCHIVE)
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(FINAL_CFLAGS) -o $@ $< $(LIB_ARCHIVE) $(FINAL_LDFLAGS) $(GLIB_LIBS) $(UNWIND_STATIC) -pthread -ldl -lm

# The running program tests/e2e/test_attach.sh attaches to (tests/e2e/progs/attach_target.cu).
$(BUILD)/e2e/attach_target: tests/e2e/progs/attach_target.cu
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) -o $@ $<
test-programs: $(BUILD)/e2e/attach_target
# The single-slot CUPTI double (tests/fakecuda/cupti/libcupti.c) and the Kineto-like program
# that subscribes through it (tests/e2e/test_cupti_subscriber.sh).
FAKE_CUPTI := $(BUILD)/fakecupti/libcupti.so.13
$(FAKE_CUPTI): tests/fakecuda/cupti/libcupti.c
	$(call say,LINK,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) -O1 -g -fPIC -shared -fvisibility=hidden $(CUDA_INC) $(SAN_FLAGS) \
		-Wl,-soname,libcupti.so.13 -o $@ $< -pthread
$(BUILD)/e2e/kineto_like: tests/e2e/progs/kineto_like.cu $(FAKE_CUPTI)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)ln -sf libcupti.so.13 $(dir $(FAKE_CUPTI))libcupti.so
	$(Q)$(NVCC_PROG) $(CUDA_INC) -o $@ $< -L$(dir $(FAKE_CUPTI)) -lcupti -ldl
test-programs: $(BUILD)/e2e/kineto_like
# A second CUPTI instance (soname libcupti.so.12) and the same program linked against it: two
# CUPTI copies in one process, the client's subscription must reach its own.
FAKE_CUPTI12 := $(BUILD)/fakecupti12/libcupti.so.12
$(FAKE_CUPTI12): tests/fakecuda/cupti/libcupti.c
	$(call say,LINK,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) -O1 -g -fPIC -shared -fvisibility=hidden $(CUDA_INC) $(SAN_FLAGS) \
		-Wl,-soname,libcupti.so.12 -o $@ $< -pthread
$(BUILD)/e2e/kineto_like12: tests/e2e/progs/kineto_like.cu $(FAKE_CUPTI12)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) $(CUDA_INC) -o $@ $< -L$(dir $(FAKE_CUPTI12)) -l:libcupti.so.12 -ldl
test-programs: $(BUILD)/e2e/kineto_like12
# What a CUPTI subscriber reads from the launch callbacks' params (tests/e2e/test_cupti_layout.sh).
$(BUILD)/e2e/cupti_layout: tests/e2e/progs/cupti_layout.cu $(FAKE_CUPTI)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) $(CUDA_INC) -o $@ $< -L$(dir $(FAKE_CUPTI)) -l:libcupti.so.13
$(BUILD)/e2e/cupti_layout_ptsz: tests/e2e/progs/cupti_layout.cu $(FAKE_CUPTI)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) --default-stream per-thread $(CUDA_INC) -o $@ $< -L$(dir $(FAKE_CUPTI)) -l:libcupti.so.13
test-programs: $(BUILD)/e2e/cupti_layout $(BUILD)/e2e/cupti_layout_ptsz
# The driver double's launch build (modules, cuLaunchKernel(Ex), CUPTI's driver-domain callbacks;
# not the torch build's) and a Triton-like program launching through it
# (tests/e2e/test_driver_launch.sh).
FAKE_DRIVER_LAUNCH := $(BUILD)/fakecuda-driver-launch/libcuda.so.1
$(FAKE_DRIVER_LAUNCH): tests/fakecuda/driver/libcuda.c
	$(call say,LINK,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) -O1 -g -fPIC -shared -fvisibility=hidden -DFK_DRIVER_LAUNCH=1 $(CUDA_INC) $(SAN_FLAGS) \
		-Wl,-soname,libcuda.so.1 -o $@ $< -ldl -pthread
$(BUILD)/e2e/triton_like: tests/e2e/progs/triton_like.cu $(FAKE_DRIVER_LAUNCH)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) -Iinclude -o $@ $< -ldl
test-programs: $(FAKE_DRIVER_LAUNCH) $(BUILD)/e2e/triton_like
# Two runtimes in one process (tests/e2e/test_mixed_runtimes.sh): a CUDA 13 program and the
# CUDA 12 library it dlopens, linked against the double's libcudart.so.12.
$(BUILD)/e2e/libmix12.so: tests/e2e/progs/libmix12.c $(FAKE12_LIB)
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) -O1 -g -fPIC -shared -fvisibility=hidden $(CUDA_INC) $(SAN_FLAGS) -o $@ $< \
		-L$(FAKE12_DIR) -l:libcudart.so.12
$(BUILD)/e2e/mixed_main: tests/e2e/progs/mixed_main.cu $(wildcard tests/progs/*.cuh)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) -o $@ $< -ldl
test-programs: $(BUILD)/e2e/libmix12.so $(BUILD)/e2e/mixed_main
# The same two runtimes armed late, by enable() and by attach (tests/e2e/test_arm_mixed.sh).
$(BUILD)/e2e/mixed_late: tests/e2e/progs/mixed_late.cu $(wildcard tests/progs/*.cuh)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) -o $@ $< -ldl
test-programs: $(BUILD)/e2e/mixed_late
# A target that is nearly always inside malloc or free (tests/e2e/test_attach_malloc.sh).
$(BUILD)/e2e/malloc_loop: tests/e2e/progs/malloc_loop.cu $(wildcard tests/progs/*.cuh)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) -o $@ $< -lpthread
test-programs: $(BUILD)/e2e/malloc_loop
# Dedicated programs of the reliability tests (tests/e2e/test_fork.sh, test_bad_input.sh):
# fork_storm forks while other threads report; bad_buffers launches a PyTorch kernel with
# pathological arguments. They include the kernels of tests/progs/torch_kernels.cuh.
E2E_PROGS := $(BUILD)/e2e/fork_storm $(BUILD)/e2e/bad_buffers $(BUILD)/e2e/graph_elsewhere $(BUILD)/e2e/graph_cond \
             $(BUILD)/e2e/graph_into \
             $(BUILD)/e2e/assert_async
$(E2E_PROGS): $(BUILD)/e2e/%: tests/e2e/progs/%.cu $(wildcard tests/progs/*.cuh)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) -o $@ $<
test-programs: $(E2E_PROGS)
# graph_into built for the per-thread default stream: its captures enter through the _ptsz hooks.
$(BUILD)/e2e/graph_into_ptsz: tests/e2e/progs/graph_into.cu $(wildcard tests/progs/*.cuh)
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) --default-stream per-thread -o $@ $<
test-programs: $(BUILD)/e2e/graph_into_ptsz

# arm.c's unit test patches the GOT of these fixture libraries (tests/unit/arm_fixture.c).
ARM_FIXTURES := $(BUILD)/tests/unit/libarmdep.so $(BUILD)/tests/unit/libarmfix_now.so \
                $(BUILD)/tests/unit/libarmfix_lazy.so
$(BUILD)/tests/unit/libarmdep.so: tests/unit/arm_fixture.c
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) -O1 -fPIC -shared -DARM_FIXTURE_DEP -o $@ $<
$(BUILD)/tests/unit/libarmfix_%.so: tests/unit/arm_fixture.c $(BUILD)/tests/unit/libarmdep.so
	$(call say,CC,$@)
	$(Q)$(CC) $(STD) $(WARN) -O1 -fPIC -shared -o $@ $< -L$(BUILD)/tests/unit -larmdep \
		-Wl,-rpath,'$$ORIGIN' -Wl,-z,relro -Wl,-z,$*
# The dlopen wrapper's search path (arm_dlopen.c): loaders that find their sibling only through
# their own RUNPATH or RPATH.
ARM_FIXTURES += $(BUILD)/tests/unit/armsub/libarmleaf.so $(BUILD)/tests/unit/libarmload_runpath.so \
                $(BUILD)/tests/unit/libarmload_rpath.so
$(BUILD)/tests/unit/armsub/libarmleaf.so: tests/unit/arm_fixture.c
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) -O1 -fPIC -shared -DARM_FIXTURE_LEAF -o $@ $<
$(BUILD)/tests/unit/libarmload_runpath.so: tests/unit/arm_fixture.c
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) -O1 -fPIC -shared -DARM_FIXTURE_LOADER -o $@ $< -ldl \
		-Wl,--enable-new-dtags,-rpath,'$$ORIGIN/armsub'
$(BUILD)/tests/unit/libarmload_rpath.so: tests/unit/arm_fixture.c
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) -O1 -fPIC -shared -DARM_FIXTURE_LOADER -o $@ $< -ldl \
		-Wl,--disable-new-dtags,-rpath,'$$ORIGIN/armsub'
# It plays a free-threaded CPython: pystack.c finds its symbols with dlsym(RTLD_DEFAULT).
$(BUILD)/tests/unit/test_pystack_walk: FINAL_LDFLAGS += -rdynamic
$(BUILD)/tests/unit/test_arm: $(ARM_FIXTURES)
$(BUILD)/tests/unit/test_arm_alloc: $(ARM_FIXTURES)
$(BUILD)/tests/unit/test_arm_runtimes: $(ARM_FIXTURES)

# The Python stack probe: src/pystack.c inside a real interpreter, loaded by
# tests/e2e/test_pystack.sh through ctypes.
PYSTACK_PROBE := $(BUILD)/tests/pystack_probe.so
$(PYSTACK_PROBE): tests/unit/pystack_probe.c $(LIB_ARCHIVE)
	$(call say,LINK,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(FINAL_CFLAGS) -shared -o $@ $< $(LIB_ARCHIVE) $(FINAL_LDFLAGS) $(UNWIND_STATIC) -Wl,--exclude-libs,ALL -pthread -ldl
test-programs: $(PYSTACK_PROBE)

# --- GPU tests: tests/gpu/NAME.cu -> $(BUILD)/tests/gpu/NAME, linked with
# the library's validate.o and embedded fatbin (the shipped loading path) and the real cudart.
# Built here without a GPU; run by tests/gpu/run.sh. `make gpu-tests` builds them all.
GPU_TEST_SRCS := $(sort $(wildcard tests/gpu/*.cu))
GPU_TEST_BINS := $(patsubst tests/gpu/%.cu,$(BUILD)/tests/gpu/%,$(GPU_TEST_SRCS))
# validate.c's backends and queue come with it; runtime.o opens libcuda for the GPU backend (forkpoint.o: its sections).
VALIDATE_OBJS := $(addprefix $(BUILD)/obj/,validate.o validate_gpu.o validate_gpu_graph.o validate_scratch.o validate_module.o validate_host.o validate_node.o validate_defer.o validate_loss.o verdicts.o graphs.o graphs_into.o graphs_notes.o captures.o runtime.o forkpoint.o)
# What else the validator's objects call (a late verdict's site, the condition's verdict) comes
# from the archive, which adds only the members they reach.
$(BUILD)/tests/gpu/%: tests/gpu/%.cu $(VALIDATE_OBJS) $(FATBIN_OBJ) $(LIB_ARCHIVE) $(wildcard src/*/*.h) cuda/lg_scan.h cuda/lg_validate.h
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC) -std=c++17 -O2 -g -cudart shared -Isrc -Icuda -Iinclude $(foreach s,$(SAN_LIST),-Xcompiler -fsanitize=$(s)) \
		-o $@ $< $(VALIDATE_OBJS) $(FATBIN_OBJ) $(LIB_ARCHIVE) $(UNWIND_STATIC) $(GLIB_LIBS) -ldl -lpthread
gpu-tests: $(GPU_TEST_BINS)
# Built (not run) by `make test` too, so a change that breaks the GPU tests' build shows in CI.
test-programs: $(GPU_TEST_BINS)
.PHONY: gpu-tests
# The validator kernels' logic run on the CPU (a thread per CUDA thread): a unit test, so
# `make test` covers cuda/validate.cu without a GPU.
KERNEL_EMU := $(BUILD)/tests/unit/test_kernel_emulation
$(KERNEL_EMU): tests/gpu/kernel_emulation.cpp cuda/validate.cu cuda/lg_scan.h cuda/lg_validate.h
	$(call say,CXX,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CXX) -std=c++20 -O1 -g -Wall -Wextra -Werror -Wno-unknown-pragmas -Wno-unused-function -Icuda $(SAN_FLAGS) \
		-o $@ $< -pthread
test-programs: $(KERNEL_EMU)

# The aarch64 build's share of the tests (tests/qemu/: under qemu-user, in the arm64 tree of
# scripts/arm64-root.sh): the library, the double, the unit tests and the programs of the e2e
# suite's core cases, cross-built into build-aarch64/ by a nested make. Part of every native,
# unsanitized `make test` on an x86_64 host.
ifneq ($(CROSS),)
QEMU_PROGS := $(addprefix $(BUILD)/progs/,nll graphs graphs_legacy graphs_ptsz threads threads_legacy forker libnllpy.so) \
              $(BUILD)/e2e/fork_storm $(BUILD)/e2e/attach_target $(BUILD)/e2e/kineto_like $(BUILD)/e2e/kineto_like12 \
              $(BUILD)/e2e/cupti_layout $(BUILD)/e2e/cupti_layout_ptsz
$(QEMU_PROGS): | $(FAKE_LIB)
qemu-programs: $(LIB) $(FAKE_LIB) $(FAKE_DRIVER) $(QEMU_PROGS) $(UNIT_BINS) $(PYSTACK_PROBE)
else ifeq ($(SANITIZER)-$(HOST_ARCH),-x86_64)
qemu-programs:
	$(Q)$(MAKE) --no-print-directory ARCH=aarch64 qemu-programs
test-programs: qemu-programs
# The aarch64 share alone (it needs the x86_64 library too: tests/qemu/test_build.sh compares
# fatbins), then real aarch64 torch under qemu (tests/qemu/torch_aarch64.sh: a 3 GB install, too
# heavy for `make test`).
test-aarch64: qemu-programs $(LIB)
	@LG_BUILD=$(BUILD) LG_TESTS=qemu/ LG_ASYNC_SUITES=none CUDA_HOME=$(CUDA_HOME) bash tests/run.sh
	@bash tests/qemu/torch_aarch64.sh
endif
.PHONY: qemu-programs test-aarch64

test: test-programs
	@LG_BUILD=$(BUILD) LG_SANITIZER=$(SANITIZER) CUDA_HOME=$(CUDA_HOME) bash tests/run.sh

# The timing-sensitive suites STRESS_N times each (default 10) under a CPU hog, with a flake
# count per suite and in all (tests/stress.sh; STRESS_TESTS replaces its list).
test-stress: test-programs
	@LG_BUILD=$(BUILD) LG_SANITIZER=$(SANITIZER) CUDA_HOME=$(CUDA_HOME) bash tests/stress.sh

# Without a GPU: the one-line reason from tests/gpu/run.sh (status 77) before anything is built.
test-gpu:
	@LG_GPU_PROBE_ONLY=1 bash tests/gpu/run.sh $(BUILD)
	@$(MAKE) --no-print-directory $(LIB) gpu-tests test-programs
	@bash tests/gpu/run.sh $(BUILD)

bench: $(LIB) $(FAKE_LIB) $(PROG_BINS) $(PROG_C_BINS)
	@LG_BUILD=$(BUILD) bash bench/run.sh

# The fast-path benchmark program (bench/run.sh: unwatched launches with and without the library).
$(BUILD)/bench/launch_loop: bench/launch_loop.cu
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) -o $@ $<
bench: $(BUILD)/bench/launch_loop $(TORCH_PY)
# C++ exceptions with and without the library (bench/throw_loop.cpp): its unwinder stays ours.
$(BUILD)/bench/throw_loop: bench/throw_loop.cpp
	$(call say,CXX,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CXX) -std=c++17 -O2 -g -o $@ $<
bench: $(BUILD)/bench/throw_loop
# Registration of torch's kernels with and without the library (bench/torch_bench.py): the
# names, written down by a preload shim in a torch process, registered again by a small program.
$(BUILD)/bench/register_loop: bench/register_loop.c $(FAKE_LIB)
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) -O2 -g -o $@ $< -L$(FAKE_DIR) -l:libcudart.so.13
$(BUILD)/bench/libkernel_names.so: bench/kernel_names.c
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) -O2 -g -fPIC -shared -o $@ $< -ldl
bench: $(BUILD)/bench/register_loop $(BUILD)/bench/libkernel_names.so
# The host scan per element, labels and each float dtype, beside memcpy (bench/scan_loop.c).
$(BUILD)/bench/scan_loop: bench/scan_loop.c cuda/lg_scan.h
	$(call say,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(STD) $(WARN) $(OPT) -g -Icuda -o $@ $<
bench: $(BUILD)/bench/scan_loop
# The launch site's cost (bench.py's launch_site) is timed through the Python stack probe;
# LABELGUARD_LAUNCH_SITES=all's (launch_sites_all) through an extension's launches.
bench: $(BUILD)/tests/pystack_probe.so $(BUILD)/progs/libassertpy.so

# The GPU-free demo program: a training loop around PyTorch's NLL kernel.
DEMO_BIN := $(BUILD)/demo/demo_train
$(DEMO_BIN): scripts/demo/demo_train.cu
	$(call say,NVCC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(NVCC_PROG) -o $@ $<

demo: $(LIB) $(FAKE_LIB) $(DEMO_BIN)
	@LG_BUILD=$(BUILD) scripts/labelguard demo

# The wheel (pyproject.toml, python/wheel_backend.py): dist/labelguard-V-py3-none-manylinux_2_17_x86_64...whl,
# the library and the Python package in one file that pip installs with nothing else. It prints
# the sizes the README gives (tests/static/test_docs.sh compares them with the built ones).
PYTHON ?= python3
wheel: $(LIB)
	$(call say,WHEEL,dist/)
	$(Q)LG_BUILD=$(BUILD) $(PYTHON) -c 'import sys; sys.path.insert(0, "python"); import wheel_backend as b; print("dist/" + b.build_wheel("dist"))' >$(BUILD)/wheel.out
	@cat $(BUILD)/wheel.out
	@$(PYTHON) -c 'import os, sys, zipfile; w, lib = sys.argv[1:]; print("sizes: wheel %.1f MB (%.1f MB installed), `%s` %.1f MB" % (os.path.getsize(w) / 1e6, sum(i.file_size for i in zipfile.ZipFile(w).infolist()) / 1e6, lib, os.path.getsize(lib) / 1e6))' "$$(tail -n1 $(BUILD)/wheel.out)" $(LIB)

fuzz: $(LIB_OBJS)
	@LG_BUILD=$(BUILD) LG_FUZZ_LONG=1 bash tests/fuzz/run.sh

# The command line is the Python package python/labelguard/ (every .py file in it) with its data
# (the torch wheel tables, tests/wheels/*.tsv, as the wheel's labelguard/data/wheels/), under
# share/labelguard/python; bin/labelguard is the shim scripts/labelguard, which finds it there;
# the package finds the library through _native/liblabelguard.so, a relative link to lib/.
install: $(LIB)
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/labelguard
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/liblabelguard.so
	install -m 0644 include/labelguard.h $(DESTDIR)$(PREFIX)/include/labelguard.h
	install -m 0644 specs/pytorch.conf $(DESTDIR)$(PREFIX)/share/labelguard/pytorch.conf
	rm -rf $(DESTDIR)$(PREFIX)/share/labelguard/python
	cd python && find labelguard -name '*.py' ! -path '*/__pycache__/*' | while read -r f; do \
	  install -D -m 0644 "$$f" "$(DESTDIR)$(PREFIX)/share/labelguard/python/$$f" || exit 1; done
	install -d $(DESTDIR)$(PREFIX)/share/labelguard/python/labelguard/data/wheels $(DESTDIR)$(PREFIX)/share/labelguard/python/labelguard/_native
	install -m 0644 tests/wheels/*.tsv $(DESTDIR)$(PREFIX)/share/labelguard/python/labelguard/data/wheels/
	ln -sf ../../../../../lib/liblabelguard.so $(DESTDIR)$(PREFIX)/share/labelguard/python/labelguard/_native/liblabelguard.so
	install -m 0755 scripts/labelguard $(DESTDIR)$(PREFIX)/bin/labelguard

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/liblabelguard.so $(DESTDIR)$(PREFIX)/include/labelguard.h \
	      $(DESTDIR)$(PREFIX)/bin/labelguard $(DESTDIR)$(PREFIX)/share/labelguard/pytorch.conf
	rm -rf $(DESTDIR)$(PREFIX)/share/labelguard/python
	-rmdir $(DESTDIR)$(PREFIX)/share/labelguard 2>/dev/null

clean:
	rm -rf build build-address build-undefined build-thread build-aarch64

-include $(wildcard $(BUILD)/obj/*.d $(BUILD)/tests/unit/*.d)

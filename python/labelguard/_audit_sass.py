"""labelguard._audit_sass: the device asserts of one cubin, for labelguard._audit_asserts.

An assert in a kernel compiles into a call to the undefined symbol `__assertfail(message, file,
line, function, char size)`. nvcc (12 and newer) puts the addresses of the call's strings, and
of `__assertfail` itself, in a constant bank (`.nv.constantN`, bank 4 in every build seen),
whose relocation section (`.rel.nv.constantN`; `.rela.nv.constantN` from sm_100 on) names the
symbol of each slot: `__assertfail`, or a string (`$str`, `__unnamed_N`) in `.nv.global.init`.
CUDA 11 relocates the code instead (`.rel.text.<function>`: the strings' halves moved into
uniform registers, and the `CALL.ABS.NOINC` itself). The code loads the strings into the ABI's
argument registers (R4:R5 message, R6:R7 file, R8 line, R10:R11 function) and calls
`CALL.ABS.NOINC Rn` through the register that holds the `__assertfail` slot (or the relocated
target). So a site is read by following, before each such call, which constant slot, string or
immediate each register last received. This needs only the few instruction forms that move a
constant or an immediate into a register (MOV, IMAD.MOV, HFMA2.MMA, LDC, ULDC, LDCU, UMOV and
moves from a uniform register) in the 128-bit encoding of sm_70 and newer; a call whose
registers cannot be followed is counted as unresolved, never guessed. A kernel carries the sites
of its own code and of the device functions it calls (`.nv.callgraph`).

Learnt from `readelf -rsW` of a tiny `assert()` kernel built with `nvcc -cubin -arch=sm_80`,
and checked on every assert call of the torch wheels in tests/wheels/asserts/ (the tables'
`# note:` lines give the unresolved count). Used by labelguard._audit_asserts; tested by
tests/cli/test_asserts.sh (an nvcc-built cubin with known asserts, when nvcc is present).
"""
import re
import struct

from labelguard._audit_elf import Elf, parse_nv_info

ASSERTFAIL = "__assertfail"

# Opcodes (low 12 bits: operation and operand form) of the moves followed.
_MOV_C = (0xA02, 0x624)       # MOV Rd, c[b][o]; IMAD.MOV.U32 Rd, RZ, RZ, c[b][o]
_MOV_I = (0x802, 0x424)       # MOV Rd, imm32; IMAD.MOV.U32 Rd, RZ, RZ, imm32
_MOV_U = (0xC02, 0xC24, 0xE24)  # MOV Rd, URb; IMAD.U32 Rd, RZ, RZ, URb (two forms)
_MOV_R = 0x202                # MOV Rd, Rb
_UMOV_I = 0x882               # UMOV URd, imm32 (a relocated string's address in CUDA 11 builds)
_HFMA2_MMA = 0x435            # HFMA2.MMA Rd, -RZ, RZ, 0, imm: nvcc's way to load a small immediate
_IMAD_MOV_R = 0x224           # IMAD.MOV.U32 Rd, RZ, RZ, Rc
_LDC = 0xB82                  # LDC(.64) Rd, c[b][Ra + o]
_ULDC = 0xAB9                 # ULDC(.64) URd, c[b][o]
_LDCU = 0x7AC                 # LDCU(.64) URd, c[b][o] (sm_100 and newer; the offset one bit lower)
_CALL_ABS = 0x343             # CALL.ABS.NOINC Ra
# Instructions that write no general register (BRA, NOP, EXIT, BSYNC, BSSY, STG, CALL.REL, RET);
# any other instruction is taken to overwrite the register named at bits 16..23, which can only
# lose track of an operand, never invent one.
_NO_DEST = frozenset((0x947, 0x918, 0x94D, 0x941, 0x945, 0x986, 0x944, 0x950))
_ARGS = (4, 6, 8, 10)         # message, file, line, function


def _cstr(b, off):
    end = b.find(b"\0", off)
    return bytes(b[off:end if end >= 0 else len(b)]).decode("utf-8", "replace")


def _symbols(cub, elf):
    st = next((s for s in elf.sections if s[1] == 2), None)
    if st is None:
        return []
    strtab = elf.sections[st[4]][2]
    out = []
    for i in range(st[3] // 24):
        name, _info, _other, shndx, value, _size = struct.unpack_from("<IBBHQQ", cub, st[2] + i * 24)
        out.append((_cstr(cub, strtab + name), shndx, value))
    return out


def _pools(cub, elf, syms):
    """{(bank, offset): "AF" for __assertfail's slot, or the string the slot points at}."""
    names = [s[0] for s in elf.sections]
    slots = {}
    for s in elf.sections:
        rela = s[0].startswith(".rela.nv.constant")  # sm_100 and newer: RELA, the addend in the entry
        if not (rela or s[0].startswith(".rel.nv.constant")):
            continue
        prefix = ".rela.nv.constant" if rela else ".rel.nv.constant"
        try:
            bank = int(s[0][len(prefix):])
            data = elf.sections[names.index(".nv.constant%d" % bank)]
        except ValueError:
            continue
        step = 24 if rela else 16
        for off in range(s[2], s[2] + s[3] - step + 1, step):
            r_off, r_info = struct.unpack_from("<QQ", cub, off)
            si = r_info >> 32
            if si >= len(syms):
                continue
            name, shndx, value = syms[si]
            if name == ASSERTFAIL:
                slots[(bank, r_off)] = "AF"
            elif 0 < shndx < len(elf.sections) and r_off + 8 <= data[3]:
                if rela:
                    addend, = struct.unpack_from("<q", cub, off + 16)
                else:
                    addend, = struct.unpack_from("<Q", cub, data[2] + r_off)
                target = elf.sections[shndx]
                if target[1] != 8:  # SHT_NOBITS holds no text
                    slots[(bank, r_off)] = _cstr(cub, target[2] + value + addend)
    return slots


# A CALL.ABS instruction's first two bytes, whatever its guard predicate (bits 12..15).
_CALL_ABS_RE = re.compile(rb"\x43[\x03\x13\x23\x33\x43\x53\x63\x73\x83\x93\xa3\xb3\xc3\xd3\xe3\xf3]")
WINDOW = 64  # instructions followed before each call: a call's operands are set up just before it


def _calls(code, slots, relocs):
    """[(message, file, line, function)] of the __assertfail calls in one function's code; an
    operand not followed is None (line: an int or None). relocs: {instruction offset: string,
    or "AF"} of the code's own relocations. Only the WINDOW instructions before each call are
    followed (CALL.ABS found with a regular expression, not a Python loop over the whole code:
    the census reads some 300000 calls in a few GB of code)."""
    calls = {m.start() for m in _CALL_ABS_RE.finditer(code) if not m.start() % 16}
    calls |= {o for o, v in relocs.items() if v == "AF"}
    out, last = [], -16
    for at in sorted(calls):
        start = max(0, at - WINDOW * 16, last + 16)
        last = at
        out += _follow(code[start:at + 16], start, slots, relocs)
    return out


def _follow(code, base, slots, relocs):
    """The __assertfail calls of one straight run of instructions (at offset base of its
    function), registers followed from its start. A register holds ("c", bank, offset) of a
    constant slot, ("i", value) of an immediate, or ("s", text) of a relocated string."""
    regs, uregs, out = {}, {}, []
    for n, (lo, hi) in enumerate(struct.iter_unpack("<QQ", code)):
        op = lo & 0xFFF
        rel = relocs.get(base + n * 16) if relocs else None
        if rel == "AF":  # CALL.ABS.NOINC to the relocated __assertfail (CUDA 11)
            out.append(_args(regs, slots))
            regs = {}
            continue
        if op in _NO_DEST:
            continue
        rd = (lo >> 16) & 0xFF
        if rel is not None:  # (U)MOV (U)Rd, 32@lo($str) / 32@hi($str): the string itself
            (uregs if op == _UMOV_I else regs)[rd] = ("s", rel)
        elif op == _UMOV_I:
            uregs[rd] = ("i", lo >> 32)
        elif op == _HFMA2_MMA and (lo >> 24) & 0xFF == 0xFF:
            regs[rd] = ("i", lo >> 32)
        elif op in _MOV_C:
            regs[rd] = ("c", (lo >> 54) & 0x1F, (lo >> 38) & 0xFFFF)
        elif op in _MOV_I:
            regs[rd] = ("i", lo >> 32)
        elif op == _LDC:
            ra, off0 = (lo >> 24) & 0xFF, 0
            if ra != 0xFF:
                v = regs.get(ra)
                off0 = v[1] if v and v[0] == "i" else None
            bank, off = (lo >> 54) & 0x1F, (lo >> 38) & 0xFFFF
            regs[rd] = regs[rd + 1] = None
            if off0 is not None:
                regs[rd], regs[rd + 1] = ("c", bank, off + off0), ("c", bank, off + off0 + 4)
        elif op == _ULDC:
            bank, off = (lo >> 54) & 0x1F, (lo >> 38) & 0xFFFF
            uregs[rd], uregs[rd + 1] = ("c", bank, off), ("c", bank, off + 4)
        elif op == _LDCU:
            bank, off = (lo >> 54) & 0x1F, (lo >> 37) & 0xFFFF
            uregs[rd], uregs[rd + 1] = ("c", bank, off), ("c", bank, off + 4)
        elif op in _MOV_U:
            regs[rd] = uregs.get((lo >> 32) & 0x3F)
        elif op == _MOV_R:
            regs[rd] = regs.get((lo >> 32) & 0xFF)
        elif op == _IMAD_MOV_R:
            regs[rd] = regs.get(hi & 0xFF)
        elif op == _CALL_ABS:
            t = regs.get((lo >> 24) & 0xFF)
            if t and t[0] == "c" and slots.get((t[1], t[2])) == "AF":
                out.append(_args(regs, slots))
            regs = {}
        elif rd != 0xFF:
            regs.pop(rd, None)
    return out


def _args(regs, slots):
    """(message, file, line, function) from the argument registers at a call."""
    args = []
    for r in _ARGS:
        v = regs.get(r)
        if r == 8:
            args.append(v[1] if v and v[0] == "i" else None)
        elif v and v[0] == "s":
            args.append(v[1])
        else:
            t = slots.get((v[1], v[2])) if v and v[0] == "c" else None
            args.append(t if t != "AF" else None)
    return tuple(args)


def _code_relocs(cub, elf, syms):
    """{function: {instruction offset: string or "AF"}} of the .rel(a).text.<function>
    sections (CUDA 11 builds address the strings and __assertfail from the code itself)."""
    out = {}
    for s in elf.sections:
        rela = s[0].startswith(".rela.text.")
        if not (rela or s[0].startswith(".rel.text.")):
            continue
        fn = s[0][len(".rela.text.") if rela else len(".rel.text."):]
        step, m = (24 if rela else 16), {}
        for off in range(s[2], s[2] + s[3] - step + 1, step):
            r_off, r_info = struct.unpack_from("<QQ", cub, off)
            si = r_info >> 32
            if si >= len(syms):
                continue
            name, shndx, value = syms[si]
            if name == ASSERTFAIL:
                m[r_off & ~15] = "AF"
            elif (name.startswith("$str") or name.startswith("__unnamed_")) and 0 < shndx < len(elf.sections):
                addend = struct.unpack_from("<q", cub, off + 16)[0] if rela else 0
                target = elf.sections[shndx]
                if target[1] != 8:
                    m[r_off & ~15] = _cstr(cub, target[2] + value + addend)
        if m:
            out.setdefault(fn, {}).update(m)
    return out


def cubin_asserts(cub):
    """The asserts of one cubin: {kernel: {"calls": [(message, file, line, function)],
    "params": [sizes]}} for every kernel (entry function) that reaches a call to __assertfail,
    in its own code or through the device functions it calls. {} when the cubin has none."""
    if ASSERTFAIL.encode() not in cub:
        return {}
    elf = Elf(cub, "cubin")
    syms = _symbols(cub, elf)
    slots = _pools(cub, elf, syms)
    relocs = _code_relocs(cub, elf, syms)
    if "AF" not in slots.values() and not relocs:
        return {}
    own = {}
    for s in elf.sections:
        if s[0].startswith(".text."):
            calls = _calls(bytes(elf.bytes_of(s)), slots, relocs.get(s[0][6:], {}))
            if calls:
                own[s[0][6:]] = calls
    edges = {}
    cg = elf.section(".nv.callgraph")
    if cg is not None:
        b = elf.bytes_of(cg)
        for i in range(0, len(b) - 7, 8):
            a, c = struct.unpack_from("<II", b, i)
            if c < len(syms) and a < len(syms) and c < 0xFFFFFFF0:
                edges.setdefault(syms[a][0], set()).add(syms[c][0])
    out = {}
    for s in elf.sections:
        if not s[0].startswith(".nv.info."):
            continue
        kernel = s[0][len(".nv.info."):]
        seen, todo, calls = {kernel}, [kernel], []
        while todo:
            f = todo.pop()
            calls += own.get(f, [])
            for g in edges.get(f, ()):
                if g not in seen:
                    seen.add(g)
                    todo.append(g)
        if calls:
            params, _cbank = parse_nv_info(bytes(elf.bytes_of(s)))
            out[kernel] = {"calls": calls, "params": [p[2] for p in params]}
    return out

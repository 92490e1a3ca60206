.section .rodata
.balign 8
.globl lg_builtin_specs
.hidden lg_builtin_specs
lg_builtin_specs:
.incbin "specs/pytorch.conf"
.globl lg_builtin_specs_end
.hidden lg_builtin_specs_end
lg_builtin_specs_end:
.byte 0
.section .note.GNU-stack,"",@progbits

.section .rodata
.balign 64
.globl lg_validator_fatbin
.hidden lg_validator_fatbin
lg_validator_fatbin:
.incbin "build-address/validate.fatbin"
.byte 0
.globl lg_validator_fatbin_end
.hidden lg_validator_fatbin_end
lg_validator_fatbin_end:
.section .note.GNU-stack,"",@progbits

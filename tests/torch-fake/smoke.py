# smoke.py: the body of tests/torch-fake/test_smoke.sh, run by build/torch-python. Prints one
# "key=value" line per fact the test checks.
#   smoke.py tensor   a CUDA tensor and a synchronisation; which runtime torch bound
#   smoke.py badlabel F.cross_entropy with a label = n_classes, then a later CUDA call
import ctypes
import os
import sys

import torch
import torch.nn.functional as F

what = sys.argv[1]
print(f"torch={torch.__version__} cuda={torch.version.cuda}")
if what == "tensor":
    x = torch.zeros(4, device="cuda")
    torch.cuda.synchronize()
    print(f"tensor_device={x.device} available={torch.cuda.is_available()} count={torch.cuda.device_count()}")
    print(f"device_name={torch.cuda.get_device_name()} capability={torch.cuda.get_device_capability()}")
    # The libcudart torch bound, by its soname: the double answers fakecudart_identity.
    rt = ctypes.CDLL(f"libcudart.so.{torch.version.cuda.split('.')[0]}", mode=os.RTLD_NOLOAD)
    ident = getattr(rt, "fakecudart_identity", None)
    if ident is not None:
        ident.restype = ctypes.c_char_p
    print(f"fakecudart_identity={ident().decode() if ident else 'missing'}")
    maps = [l.split()[-1] for l in open("/proc/self/maps") if "libcudart" in l]
    print("runtimes=" + ",".join(sorted(set(maps))))
elif what == "badlabel":
    logits = torch.randn(8, 10)
    labels = torch.tensor([0, 1, 2, 10, 4, 5, 6, 7])
    try:
        loss = F.cross_entropy(logits.cuda(), labels.cuda())  # the loss call
        print(f"loss={loss.item()}")
    except RuntimeError as e:  # torch.AcceleratorError is a RuntimeError
        print(f"exception={type(e).__name__}")
        print("message=" + str(e).splitlines()[0])
    try:
        y = torch.ones(2, device="cuda") * 2
        torch.cuda.synchronize()
        print(f"later=ok {y.shape[0]}")
    except RuntimeError as e:
        print("later_error=" + str(e).splitlines()[0])
    try:
        print(f"labels_cpu={labels.cuda().cpu().tolist()}")
    except RuntimeError as e:
        print("labels_cpu_error=" + str(e).splitlines()[0])

"""notebook.py: runs a three-cell notebook in a real Jupyter kernel (ipykernel, started by
nbclient through the kernelspec KERNEL) and prints each cell's outputs as `CELL n {json}` lines.

  python notebook.py KERNEL

Cell 1 loads the extension before torch is imported; cell 2 is a bad-label loss on real torch
(on the CUDA test double); cell 3 uses CUDA afterwards and asks the API for the violation.
Run by tests/pip/test_jupyter.sh, which judges the lines."""
import json
import sys

import nbclient
import nbformat
from nbformat.v4 import new_code_cell, new_notebook

cells = [
    "%load_ext labelguard",
    "import torch, torch.nn.functional as F\n"
    "logp = torch.log_softmax(torch.linspace(-1, 1, 40).reshape(8, 5), 1).cuda()\n"
    "labels = torch.tensor([0, 1, 5, 2, 7, 3, 4, 0]).cuda()\n"
    "print(F.nll_loss(logp, labels).item())",
    "import labelguard\n"
    "print('labels', labels.cpu().tolist())\n"
    "print('copy', torch.tensor([3, 1, 2]).cuda().cpu().tolist())\n"
    "v = labelguard.last_violation()\n"
    "print('samples', [[s['index'], s['value']] for s in v['bad']['samples']])\n"
    "print('maps', sorted({l.split()[-1] for l in open('/proc/self/maps') if l.rstrip().endswith('/liblabelguard.so')}))",
]
nb = new_notebook(cells=[new_code_cell(c) for c in cells])
client = nbclient.NotebookClient(nb, kernel_name=sys.argv[1], timeout=180, allow_errors=True)
client.execute()
for n, cell in enumerate(nb.cells, 1):
    outs = []
    for o in cell.outputs:
        if o.output_type == "stream":
            outs.append({"stream": o.name, "text": o.text})
        elif o.output_type == "error":
            outs.append({"error": o.ename, "text": o.evalue})
        else:
            outs.append({"other": o.output_type})
    print("CELL %d %s" % (n, json.dumps(outs)))
nbformat.validate(nb)

"""causes_cases.py MODE OUT: the cause of a bad id follows from what the ids index, not from the
kernel alone, on real torch on the test double. One scatter kernel serves F.one_hot and message
passing, one gather / index_select kernel nn.Embedding, index_select along any dimension and
take_along_dim:
  one_hot        F.one_hot(labels, num_classes=4) with a 4: a class dimension (target.indexes
                 "classes", cause num_classes_too_small), not node ids
  one_hot float  zeros(B, C).scatter_(1, y[:, None], 1.0), the hand-made one-hot: the same
  index_select1  x.index_select(1, cols) with 3 and with 40 ids (indexSelectSmallIndex, and the
                 gather kernel on 2.15): a plain dimension (index_out_of_range), no
                 resize_token_embeddings
  take_along_dim torch.take_along_dim(x, idx) (flattened, the gather kernel): a plain dimension
  gather         torch.gather(x, 1, idx): a plain dimension
  embedding      nn.Embedding(10, 8) with 3 ids, and with 40 ids: the vocabulary (vocab_too_small)
  F.embedding    the functional form: the vocabulary
  index_add      out.index_add_(0, dst, msg), and a GNN scatter_add_ over an expanded dst: node
                 rows (node_id_out_of_range)
Each case under raise: one violation; its cause, target.indexes, and the cause's fix in the
RuntimeError. Prints one "ok: ..." / "FAIL: ..." line per check; exits 1 on any failure. Run by
test_causes.sh under both wheels.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # caselib.py, beside this file
from caselib import check, finish, new_events, run  # noqa: E402

MODE, OUT = sys.argv[1], sys.argv[2]
cuda = torch.device("cuda")


def case(name, fn, cause, indexes, bound, text=None, no_text=None):
    _, exc = run(fn)
    V = new_events(OUT)
    check("%s: blocked with labelguard's error" % name, exc is not None and "labelguard" in str(exc), exc)
    check("%s: one violation" % name, len(V) == 1, [(v["kernel"], v["family"]) for v in V])
    if len(V) != 1:
        return
    v = V[0]
    check("%s: cause %s, target.indexes %s, bound %d (%s, %s)" % (name, cause, indexes, bound, v["kernel"], v["family"]),
          v["cause"] == cause and v["target"].get("indexes") == indexes and v["target"]["bound"] == bound,
          (v["cause"], v["target"].get("indexes"), v["target"]["bound"], v["cause_text"]))
    if text:
        check("%s: the cause's words say '%s'" % (name, text), text in v["cause_text"], v["cause_text"])
    if no_text:
        check("%s: and not '%s'" % (name, no_text), no_text not in v["cause_text"] and no_text not in str(exc),
              v["cause_text"])


labels = torch.tensor([0, 1, 4, 2, 3, 0])
case("one_hot", lambda: F.one_hot(labels.to(cuda), num_classes=4), "num_classes_too_small", "classes", 4,
     "num_classes >= 5", "node")
case("one_hot 2-D labels", lambda: F.one_hot(labels.view(2, 3).to(cuda), num_classes=4), "num_classes_too_small",
     "classes", 4, "num_classes >= 5", "node")
case("one_hot float, scatter_", lambda: torch.zeros(6, 4, device=cuda).scatter_(1, labels.view(-1, 1).to(cuda), 1.0),
     "num_classes_too_small", "classes", 4)

x = torch.randn(3, 5).to(cuda)
cols = torch.tensor([0, 5, 1]).to(cuda)
case("x.index_select(1, cols), 3 ids", lambda: x.index_select(1, cols), "index_out_of_range", "dimension", 5,
     "the dimension they index has size 5", "resize_token_embeddings")
cols40 = torch.tensor([i % 5 for i in range(40)])
cols40[17] = 5
cols40 = cols40.to(cuda)
case("x.index_select(1, cols), 40 ids", lambda: x.index_select(1, cols40), "index_out_of_range", "dimension", 5,
     None, "resize_token_embeddings")
flat = torch.tensor([0, 3, 15, 2]).to(cuda)  # x has 15 elements
case("torch.take_along_dim(x, idx)", lambda: torch.take_along_dim(x, flat), "index_out_of_range", "dimension", 15,
     None, "resize_token_embeddings")
g = torch.tensor([[0], [5], [1]]).to(cuda)
case("torch.gather(x, 1, idx)", lambda: torch.gather(x, 1, g), "index_out_of_range", "dimension", 5,
     None, "resize_token_embeddings")

emb = torch.nn.Embedding(10, 8).to(cuda)
case("nn.Embedding, 3 ids", lambda: emb(torch.tensor([1, 10, 3]).to(cuda)), "vocab_too_small", "vocabulary", 10,
     "resize_token_embeddings")
ids40 = torch.tensor([i % 10 for i in range(40)])
ids40[33] = 11
ids40 = ids40.to(cuda)
case("nn.Embedding, 40 ids", lambda: emb(ids40), "vocab_too_small", "vocabulary", 10, "resize_token_embeddings")
case("F.embedding", lambda: F.embedding(torch.tensor([2, 12]).to(cuda), emb.weight), "vocab_too_small", "vocabulary",
     10, "resize_token_embeddings")

out = torch.zeros(4, 3).to(cuda)
case("index_add_(0, dst, msg)", lambda: out.index_add_(0, torch.tensor([0, 4, 1]).to(cuda), torch.ones(3, 3).to(cuda)),
     "node_id_out_of_range", "nodes", 4, "past the last node")
dst = torch.tensor([0, 1, 6, 3]).to(cuda)
agg = torch.zeros(6, 2).to(cuda)
case("GNN scatter_add_ over an expanded dst", lambda: agg.scatter_add_(0, dst.view(-1, 1).expand(-1, 2),
                                                                       torch.ones(4, 2).to(cuda)),
     "node_id_out_of_range", "nodes", 6)
finish()

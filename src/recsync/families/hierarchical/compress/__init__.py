"""Codecs for the tensors a trainer and a group parameter server exchange in hierarchical
training (Huang et al. 2021, Sec. 4.2): INT8 activations, bfloat16 gradients, top-k
sparsification with error feedback. Math only: each codec turns a tensor into an `Encoded`
payload (whose tensors are what goes on the wire) and back."""

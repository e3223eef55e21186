"""The model of docs/model.md written a second time, in PyTorch (fp64), for the reference check.

Nothing here is ported from paraxis: the forward pass follows docs/model.md with PyTorch's own
operators (F.layer_norm, F.gelu(approximate="tanh"), F.cross_entropy, softmax), every gradient
is torch autograd's, and the optimizer is torch.optim.AdamW with torch.nn.utils.clip_grad_norm_.
Parameters are a dict {name: tensor} with paraxis's tensor names and shapes (weights [in, out]).
"""

import math

import torch
import torch.nn.functional as F

LN_EPS = 1e-5  # docs/model.md: LayerNorm eps 1e-5, biased variance (F.layer_norm's definition)


def is_moe_layer(model, layer):
    moe = model["moe"]
    return moe["experts"] > 0 and (layer + 1) % moe["every"] == 0


def layer_norm(x, p, name):
    return F.layer_norm(x, x.shape[-1:], p[name + ".gamma"], p[name + ".beta"], eps=LN_EPS)


def attention(h, p, pre, model, batch):
    """Causal multi-head attention, separate Q, K, V with biases, scale 1/sqrt(head_dim)."""
    seq, heads = h.shape[0] // batch, model["heads"]
    hd = model["hidden"] // heads

    def split(t):  # [batch * seq, hidden] -> [batch, heads, seq, head_dim]; head i: columns i*hd..
        return t.view(batch, seq, heads, hd).transpose(1, 2)

    q, k, v = (split(h @ p[pre + "w" + c] + p[pre + "b" + c]) for c in "qkv")
    scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
    future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    a = (probs @ v).transpose(1, 2).reshape(batch * seq, heads * hd)
    return a @ p[pre + "wo"] + p[pre + "bo"]


def mlp(h, p, pre):
    u = h @ p[pre + "w1"] + p[pre + "b1"]
    return F.gelu(u, approximate="tanh") @ p[pre + "w2"] + p[pre + "b2"]


def top_k_choices(probs, k):
    """Each token's k most probable experts, ties to the lower index (a stable sort)."""
    return torch.sort(probs.detach(), dim=-1, descending=True, stable=True).indices[:, :k]


def kept_assignments(choice, experts, capacity):
    """Capacity in token-major order (token 0 slot 0, token 0 slot 1, token 1 slot 0, ...):
    per expert the first `capacity` assignments are kept (None: dropless). [(n, j)] per expert."""
    kept = [[] for _ in range(experts)]
    for n, row in enumerate(choice.tolist()):
        for j, e in enumerate(row):
            if capacity is None or len(kept[e]) < capacity:
                kept[e].append((n, j))
    return kept


def moe(h, p, pre, model):
    """The MoE layer: (output, Switch auxiliary loss, dropped assignments)."""
    cfg = model["moe"]
    tokens, experts, k = h.shape[0], cfg["experts"], cfg["top_k"]
    logits = h @ p[pre + "router"]
    if pre + "router_bias" in p:
        logits = logits + p[pre + "router_bias"]
    probs = torch.softmax(logits, dim=-1)
    choice = top_k_choices(probs, k)
    gates = probs.gather(1, choice)  # the selected probabilities, not renormalised
    cf = cfg["capacity_factor"]
    capacity = math.ceil(cf * tokens * k / experts) if cf > 0 else None
    out = torch.zeros_like(h)
    kept = kept_assignments(choice, experts, capacity)
    for e, slots in enumerate(kept):
        if not slots:
            continue
        n = torch.tensor([s[0] for s in slots])
        j = torch.tensor([s[1] for s in slots])
        y = mlp(h[n], p, f"{pre}experts.{e}.") * gates[n, j].unsqueeze(1)
        out = out.index_add(0, n, y)
    # Switch Transformer eq. 4 for top-k: f_e (requested, before capacity) is a constant.
    f = torch.bincount(choice.flatten(), minlength=experts).to(h.dtype) / (tokens * k)
    aux = experts * (f * probs.mean(dim=0)).sum()
    dropped = tokens * k - sum(len(s) for s in kept)
    return out, aux, dropped


def forward(p, model, tokens, targets):
    """One micro-batch [batch, seq]: (logits [batch * seq, vocab], cross-entropy sum,
    sum over MoE layers of L_aux, dropped assignments)."""
    batch, seq = tokens.shape
    x = p["wte"][tokens.reshape(-1)] + p["wpe"][torch.arange(seq)].repeat(batch, 1)
    aux, dropped = torch.zeros((), dtype=x.dtype), 0
    for layer in range(model["layers"]):
        pre = f"layers.{layer}."
        x = x + attention(layer_norm(x, p, pre + "ln1"), p, pre + "attn.", model, batch)
        h2 = layer_norm(x, p, pre + "ln2")
        if is_moe_layer(model, layer):
            y, a, d = moe(h2, p, pre + "moe.", model)
            x, aux, dropped = x + y, aux + a, dropped + d
        else:
            x = x + mlp(h2, p, pre + "mlp.")
    logits = layer_norm(x, p, "lnf") @ p["head"]
    ce_sum = F.cross_entropy(logits, targets.reshape(-1), reduction="sum")
    return logits, ce_sum, aux, dropped


def step_loss(p, model, train, tokens, targets):
    """The objective of one step over its global batch [global_batch, seq] (docs/model.md,
    "Loss"): lm_loss + aux_loss_coef * aux_loss, and its parts."""
    gb, mb = train["global_batch"], train["micro_batch"]
    micro = gb // mb
    lm, aux, dropped = 0.0, 0.0, 0
    for j in range(micro):
        rows = slice(j * mb, (j + 1) * mb)
        _, ce, a, d = forward(p, model, tokens[rows], targets[rows])
        lm, aux, dropped = lm + ce / tokens.numel(), aux + a / micro, dropped + d
    loss = lm + model["moe"]["aux_loss_coef"] * aux
    return loss, lm, aux, dropped


def decays(name, value):
    """Decoupled weight decay on matrices and embeddings, not on biases, LayerNorms or the
    router (docs/model.md, "Training step")."""
    return value.dim() == 2 and not name.endswith(".router")


def make_optimizer(p, train, moments=None, step=0):
    """torch.optim.AdamW over p, constant lr, optionally resumed from {name: (m, v)} after
    `step` completed steps."""
    groups = [{"params": [t for n, t in p.items() if decays(n, t)],
               "weight_decay": train["weight_decay"]},
              {"params": [t for n, t in p.items() if not decays(n, t)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=train["lr"], betas=(train["beta1"], train["beta2"]),
                            eps=train["adam_eps"])
    for name, t in p.items():
        if moments is not None:
            m, v = moments[name]
            opt.state[t] = {"step": torch.tensor(float(step)), "exp_avg": m.clone(),
                            "exp_avg_sq": v.clone()}
    return opt


def train_step(p, opt, model, train, tokens, targets):
    """One training step: gradients of the objective, global-norm clipping (torch's
    clip_grad_norm_: scale max_norm / (||g|| + 1e-6) when ||g|| > max_norm), AdamW."""
    opt.zero_grad(set_to_none=True)
    loss, lm, aux, dropped = step_loss(p, model, train, tokens, targets)
    loss.backward()
    params = list(p.values())
    for t in params:  # an expert no token reached still takes its AdamW step, with g = 0
        if t.grad is None:
            t.grad = torch.zeros_like(t)
    if train["grad_clip"] > 0:
        norm = torch.nn.utils.clip_grad_norm_(params, train["grad_clip"])
    else:
        norm = torch.linalg.vector_norm(torch.stack([t.grad.norm() for t in params]))
    opt.step()
    return {"loss": loss.item(), "lm_loss": float(lm), "aux_loss": float(aux),
            "grad_norm": float(norm), "dropped": dropped}

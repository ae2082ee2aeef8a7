"""Neural-network programs: MLPs, convolutions, recurrent nets, attention,
normalisation layers and the usual losses, written the way they appear in
tutorials (plain NumPy, Python loops, accumulators starting from 0.0)."""
import numpy as np

from . import program, rng


def _softmax(z, axis=-1):
    z = z - np.max(z, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def _mlp_args():
    r = rng(1)
    return (r.standard_normal((4, 8)) * 0.5, np.zeros(8) + 0.1, r.standard_normal((8, 3)) * 0.5,
            np.zeros(3), r.standard_normal((6, 4)), r.integers(0, 3, 6))


@program(args=_mlp_args)
def mlp_cross_entropy(W1, b1, W2, b2, x, y):
    h = np.tanh(x @ W1 + b1)
    logits = h @ W2 + b2
    logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(len(y)), y])


@program(args=_mlp_args)
def mlp_relu_maximum(W1, b1, W2, b2, x, y):
    h = np.maximum(0.0, x @ W1 + b1 + 0.05)
    logits = h @ W2 + b2
    p = _softmax(logits)
    onehot = np.eye(3)[y]
    return -np.sum(onehot * np.log(p + 1e-12)) / x.shape[0]


@program(args=_mlp_args)
def mlp_relu_where(W1, b1, W2, b2, x, y):
    a = x @ W1 + b1
    h = np.where(a > 0, a, 0.01 * a)          # leaky ReLU
    out = h @ W2 + b2
    return np.mean((out - np.eye(3)[y]) ** 2)


@program(args=_mlp_args)
def mlp_clip_activation(W1, b1, W2, b2, x, y):
    h = np.clip(x @ W1 + b1, -0.7, 0.7)       # hard tanh
    out = h @ W2 + b2
    return np.sum(np.abs(out - 0.3) ** 1.5)


@program(args=lambda: ({"W": [rng(2).standard_normal((3, 5)), rng(3).standard_normal((5, 1))],
                        "b": [np.zeros(5), np.zeros(1)]}, rng(4).standard_normal((7, 3)),
                       rng(5).standard_normal(7)))
def mlp_dict_of_lists(params, x, y):
    h = x
    for i, (W, b) in enumerate(zip(params["W"], params["b"])):
        h = h @ W + b
        if i < len(params["W"]) - 1:
            h = np.tanh(h)
    return np.mean((h[:, 0] - y) ** 2)


@program(args=lambda: (rng(6).standard_normal((2, 1, 3, 3)) * 0.3, rng(7).standard_normal((2, 1, 6, 6))))
def conv2d_im2col(kernels, images):
    n, c, H, W = images.shape
    k = kernels.shape[-1]
    cols = []
    for i in range(H - k + 1):
        for j in range(W - k + 1):
            cols.append(images[:, :, i:i + k, j:j + k].reshape(n, -1))
    cols = np.stack(cols, axis=1)                         # (n, positions, c*k*k)
    out = cols @ kernels.reshape(kernels.shape[0], -1).T  # (n, positions, filters)
    return np.sum(np.tanh(out) ** 2)


@program(args=lambda: (rng(8).standard_normal((3, 3)), rng(9).standard_normal((8, 8))))
def conv2d_einsum_windows(kernel, image):
    k = kernel.shape[0]
    H = image.shape[0] - k + 1
    idx = np.arange(H)[:, None] + np.arange(k)[None, :]          # (H, k)
    patches = image[idx[:, None, :, None], idx[None, :, None, :]]  # (H, H, k, k)
    out = np.einsum("ijab,ab->ij", patches, kernel)
    return np.sum(np.maximum(out, 0.0) ** 2)


@program(args=lambda: (rng(10).standard_normal(5), rng(11).standard_normal(20)))
def conv1d_np_convolve(kernel, signal):
    y = np.convolve(signal, kernel, mode="valid")
    return np.sum(y ** 2) / len(y)


@program(args=lambda: (rng(12).standard_normal(4), rng(13).standard_normal(16)))
def conv1d_loop(kernel, signal):
    out = np.zeros(len(signal) - len(kernel) + 1)
    loss = 0.0
    for t in range(len(out)):
        v = np.dot(signal[t:t + len(kernel)], kernel)
        loss += (v - 0.5) ** 2
    return loss


@program(args=lambda: (rng(14).standard_normal((2, 2, 3, 3)) * 0.5,))
def maxpool_reshape(x):
    n, c, h, w = x.shape
    x = np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)))
    pooled = x.reshape(n, c, 2, 2, 2, 2).max(axis=(3, 5))
    return np.sum(pooled ** 2)


def _rnn_args():
    r = rng(15)
    return (r.standard_normal((3, 5)) * 0.4, r.standard_normal((5, 5)) * 0.4,
            r.standard_normal(5) * 0.4, r.standard_normal((6, 3)), r.standard_normal(6))


@program(args=_rnn_args)
def rnn_accumulate_loss(Wx, Wh, v, xs, ys):
    h = np.zeros(5)
    loss = 0.0
    for t in range(len(xs)):
        h = np.tanh(xs[t] @ Wx + h @ Wh)
        loss += (h @ v - ys[t]) ** 2
    return loss / len(xs)


@program(args=_rnn_args)
def rnn_for_row_in_x(Wx, Wh, v, xs, ys):
    h = np.zeros(5)
    preds = []
    for x in xs:
        h = np.tanh(np.dot(x, Wx) + np.dot(h, Wh))
        preds.append(np.dot(h, v))
    return np.mean((np.stack(preds) - ys) ** 2)


@program(args=_rnn_args)
def rnn_np_array_of_list(Wx, Wh, v, xs, ys):
    h = np.zeros(5)
    preds = []
    for x in xs:
        h = np.tanh(x @ Wx + h @ Wh)
        preds.append(h @ v)
    return np.mean((np.array(preds) - ys) ** 2)


def _lstm_args():
    r = rng(16)
    d, h = 3, 4
    return ({"W": r.standard_normal((d + h, 4 * h)) * 0.3, "b": np.zeros(4 * h)},
            r.standard_normal((5, d)))


@program(args=_lstm_args)
def lstm_sequence(params, xs):
    H = params["b"].shape[0] // 4
    h = np.zeros(H)
    c = np.zeros(H)
    loss = 0.0
    for x in xs:
        z = np.concatenate([x, h]) @ params["W"] + params["b"]
        i, f, o, g = np.split(z, 4)
        sig = lambda a: 1.0 / (1.0 + np.exp(-a))
        c = sig(f) * c + sig(i) * np.tanh(g)
        h = sig(o) * np.tanh(c)
        loss += np.sum(h ** 2)
    return loss


@program(args=lambda: (rng(17).standard_normal(4) * 0.4, rng(18).standard_normal(4) * 0.4,
                       rng(57).standard_normal(4) * 0.4, rng(19).standard_normal((5, 3))))
def gru_hstack(wz, wr, wh, xs):
    h = np.zeros(1)
    loss = 0.0
    for x in xs:
        xh = np.hstack([x, h])
        z = 1 / (1 + np.exp(-xh @ wz))
        r = 1 / (1 + np.exp(-xh @ wr))
        cand = np.tanh(np.hstack([x, r * h]) @ wh)
        h = (1 - z) * h + z * cand
        loss += h[0] ** 2
    return loss


def _attn_args():
    r = rng(20)
    return r.standard_normal((6, 4)), r.standard_normal((4, 4)) * 0.5, r.standard_normal((4, 4)) * 0.5, \
        r.standard_normal((4, 4)) * 0.5


@program(args=_attn_args)
def self_attention(x, Wq, Wk, Wv):
    q, k, v = x @ Wq, x @ Wk, x @ Wv
    scores = q @ k.T / np.sqrt(q.shape[-1])
    mask = np.triu(np.ones((6, 6), dtype=bool), k=1)
    scores = np.where(mask, -1e9, scores)
    att = _softmax(scores, axis=-1)
    return np.sum((att @ v) ** 2)


@program(args=_attn_args)
def multihead_attention_einsum(x, Wq, Wk, Wv):
    T, D = x.shape
    heads = 2
    q = (x @ Wq).reshape(T, heads, D // heads).transpose(1, 0, 2)
    k = (x @ Wk).reshape(T, heads, D // heads).swapaxes(0, 1)
    v = (x @ Wv).reshape(T, heads, D // heads).transpose(1, 0, 2)
    s = np.einsum("htd,hsd->hts", q, k) / np.sqrt(D // heads)
    s = s - s.max(axis=-1, keepdims=True)
    a = np.exp(s) / np.exp(s).sum(axis=-1, keepdims=True)
    out = np.einsum("hts,hsd->thd", a, v).reshape(T, D)
    return np.mean(out ** 2)


@program(args=lambda: (rng(21).standard_normal((5, 6)), np.ones(6), np.zeros(6)))
def layer_norm(x, gamma, beta):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    y = gamma * (x - mu) / np.sqrt(var + 1e-5) + beta
    return np.sum(y[:, :3] ** 3)


@program(args=lambda: (rng(22).standard_normal((8, 3)) * 2 + 1, rng(23).standard_normal(3), rng(24).standard_normal(3)))
def batch_norm_std(x, gamma, beta):
    y = (x - np.mean(x, axis=0)) / (np.std(x, axis=0) + 1e-5)
    return np.sum(np.sin(gamma * y + beta))


@program(args=lambda: (rng(25).standard_normal((5, 4)), rng(26).integers(0, 4, 5)))
def logsumexp_by_hand(logits, labels):
    m = np.max(logits, axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.sum(np.exp(logits - m), axis=1))
    picked = np.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
    return np.sum(lse - picked)


@program(args=lambda: (rng(27).standard_normal((10, 3)), rng(28).integers(0, 10, 12), rng(29).standard_normal((12, 3))))
def embedding_repeated_indices(E, ids, targets):
    vecs = E[ids]                         # ids repeat: gradient rows accumulate
    return np.sum((vecs - targets) ** 2)


@program(args=lambda: (rng(30).standard_normal((10, 3)), np.array([1, 1, 4, 7, 1])))
def embedding_np_take(E, ids):
    return np.sum(np.take(E, ids, axis=0) @ np.arange(3.0))


@program(args=lambda: (rng(31).standard_normal((4, 6)) * 0.5, rng(32).standard_normal((6, 4)) * 0.5,
                       rng(33).standard_normal((9, 4)), (rng(34).random((9, 6)) > 0.3)))
def autoencoder_dropout_mask(We, Wd, x, keep):
    h = np.tanh(x @ We) * keep / 0.7
    rec = h @ Wd
    return np.mean(np.sum((rec - x) ** 2, axis=1))


@program(args=lambda: (rng(35).standard_normal((4, 2)), rng(36).standard_normal((4, 2)) * 0.1,
                       rng(37).standard_normal((4, 2)), rng(38).standard_normal((3, 4))))
def vae_elbo_reparam(W_mu, W_logvar, eps, x):
    mu = x @ W_mu
    logvar = x @ W_logvar
    z = mu + np.exp(0.5 * logvar) * eps[:3]
    rec = z @ W_mu.T
    kl = -0.5 * np.sum(1 + logvar - mu ** 2 - np.exp(logvar))
    return np.sum((rec - x) ** 2) + kl


@program(args=lambda: (rng(39).standard_normal((6, 3)), rng(40).standard_normal((6, 3))))
def contrastive_cosine(a, b):
    an = a / np.linalg.norm(a, axis=1, keepdims=True)
    bn = b / np.linalg.norm(b, axis=1, keepdims=True)
    sim = an @ bn.T / 0.5
    logp = sim - np.log(np.exp(sim).sum(axis=1, keepdims=True))
    return -np.trace(logp) / len(a)


@program(args=lambda: (rng(41).standard_normal(12) * 2, rng(42).standard_normal(12)))
def huber_loss(pred, target):
    r = pred - target
    quad = 0.5 * r ** 2
    lin = np.abs(r) - 0.5
    return np.sum(np.where(np.abs(r) <= 1.0, quad, lin))


@program(args=lambda: (rng(43).standard_normal(10), (rng(44).random(10) > 0.5).astype(float)), argnums=(0,),
         note="y is a 0/1 label compared with ==: not differentiable at its value")
def focal_loss_binary(logits, y):
    p = 1 / (1 + np.exp(-logits))
    pt = np.where(y == 1, p, 1 - p)
    return -np.sum((1 - pt) ** 2 * np.log(pt))


@program(args=lambda: (rng(45).standard_normal(10), (rng(46).random(10) > 0.5).astype(float)))
def bce_logaddexp(logits, y):
    return np.mean(np.logaddexp(0.0, logits) - y * logits)


@program(args=lambda: (rng(47).standard_normal((4, 4)).astype(np.float32) * 0.5,
                       rng(48).standard_normal((5, 4)).astype(np.float32)))
def mlp_float32(W, x):
    h = np.tanh(x @ W)
    return np.sum(h * h) / np.float32(5)


@program(args=lambda: (rng(49).standard_normal((4, 8)) * 0.5, rng(50).standard_normal((8, 4)) * 0.5,
                       rng(51).standard_normal((5, 4))))
def transformer_mlp_block_gelu(W1, W2, x):
    h = x @ W1
    g = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    y = x + g @ W2
    mu = y.mean(-1, keepdims=True)
    sd = np.sqrt(((y - mu) ** 2).mean(-1, keepdims=True) + 1e-6)
    return np.sum(((y - mu) / sd)[0])


@program(args=lambda: (rng(52).standard_normal(5), rng(53).standard_normal(5)))
def triplet_margin(anchor, pos):
    neg = np.linspace(-1, 1, 5)
    d_pos = np.sqrt(np.sum((anchor - pos) ** 2))
    d_neg = np.sqrt(np.sum((anchor - neg) ** 2))
    return np.maximum(d_pos - d_neg + 1.0, 0.0)


@program(args=lambda: (rng(54).standard_normal((3, 4)), rng(55).standard_normal((6, 4)), rng(56).integers(0, 3, 6)))
def softmax_regression_l2(W, x, y):
    logits = x @ W.T
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    nll = -np.log(probs[range(len(y)), y]).mean()
    return nll + 0.01 * np.sum(W ** 2)


@program(args=lambda: (rng(58).standard_normal((20000, 4)) * 0.1, rng(59).standard_normal((4, 3)) * 0.5,
                       np.array([[3, 17, 17, 999], [5, 3, 12345, 17]]), np.array([0, 2])))
def bag_of_words_large_embedding(E, W, docs, labels):
    h = np.mean(E[docs], axis=1)                   # (batch, dim): a few rows of a 20000-row table
    logits = h @ W
    logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(len(labels)), labels])


@program(args=lambda: (rng(60).standard_normal((5, 5)),))
def image_blur_reflect_padding(img):
    k = np.array([[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]) / 16
    p = np.pad(img, 1, mode="reflect")
    out = sum(k[i, j] * p[i:i + 5, j:j + 5] for i in range(3) for j in range(3))
    return np.sum((out - img) ** 2)

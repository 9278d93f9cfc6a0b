"""The test models of the compiler (issue 4's must-show list) and the SPIR-V→WGSL differential tests,
small enough for lavapipe; one definition each."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 32, dtype=dtype), nn.Linear(32, 8, dtype=dtype)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


class ConvBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)

    def forward(self, x):
        return F.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)


class TransformerBlock(nn.Module):
    def __init__(self, d=32, heads=2):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(d, dim=-1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CausalAttention(nn.Module):
    """One attention layer with a GELU output (fewer executables than TransformerBlock)."""

    def __init__(self, d=32, heads=2):
        super().__init__()
        self.ln, self.qkv, self.out, self.heads = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d), heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, -1)

        def split(z):
            return z.view(b, t, self.heads, d // self.heads).transpose(1, 2)

        y = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
        return x + self.out(F.gelu(y.transpose(1, 2).reshape(b, t, d)))


class EmbeddingArgmax(nn.Module):
    def __init__(self, vocab=50, classes=10):
        super().__init__()
        self.emb, self.head = nn.Embedding(vocab, 16), nn.Linear(16, classes)

    def forward(self, idx):
        return self.head(self.emb(idx)).argmax(-1)


class Fn(nn.Module):
    """A function as a module."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def tiny_gpt2(**config):
    """transformers' GPT2LMHeadModel with a tiny config and random weights (no downloads)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    options = dict(n_layer=2, n_embd=64, n_head=2, vocab_size=100, n_positions=32, bos_token_id=0,
                   eos_token_id=0)
    return GPT2LMHeadModel(GPT2Config(**{**options, **config})).eval()


class GPT2Logits(nn.Module):
    """A GPT2LMHeadModel returning only its logits (no KV cache): one tensor out, exportable."""

    def __init__(self, model=None):
        super().__init__()
        self.model = tiny_gpt2() if model is None else model

    def forward(self, ids):
        return self.model(ids, use_cache=False).logits


class BasicBlock(nn.Module):
    """ResNet's residual block, with the strided 1x1 downsample when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + self.down(x))


class SmallResNet(nn.Module):
    """ResNet-18's shape in miniature: strided stem, a stride-2 block on a 2x2 map (its padded input
    reaches past the only window, as in ResNet-18's last stage at 32x32), adaptive average pool, head."""

    def __init__(self, width=4, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.block = BasicBlock(width, 2 * width, 2)
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.block(self.stem(x)), 1)
        return self.head(torch.flatten(x, 1))

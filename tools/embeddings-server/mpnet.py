"""all-mpnet-base-v2 sentence embeddings in NumPy, from the model's own safetensors weights.

Computes what sentence-transformers computes for this model (modules.json: Transformer ->
mean Pooling -> Normalize) without torch: the MPNet encoder of Hugging Face transformers
(`MPNetModel`, eval mode, so no dropout), mean pooling over the tokens, L2 normalisation.

Rules followed, each as in sentence-transformers / transformers:
- tokenizer: the model's `tokenizer.json` (`<s> text </s>`), truncated to `max_seq_length`
  from `sentence_bert_config.json` (384), no padding: attention runs within each text, which is
  the padded batch's result for that row without the padding (several texts share the per-token
  steps, see `_embed_packed`);
- position ids start at padding_idx + 1 (= 2) and count the non-padding tokens;
- relative attention bias: T5-style buckets (32 buckets, max distance 128, bidirectional),
  shared by all layers;
- GELU is the exact erf form; LayerNorm eps from config.json (1e-5);
- normalisation divides by max(norm, 1e-12), as torch.nn.functional.normalize.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from scipy.special import erf
from tokenizers import Tokenizer

# Tokens per packed group: bounds the (tokens, 3072) intermediate activations to about 50 MB.
PACKED_TOKENS = 4096


class MPNetEmbedder:
    """Loads a sentence-transformers all-mpnet-base-v2 directory and embeds texts."""

    def __init__(self, model_dir: str | Path, dtype: type = np.float32):
        model_dir = Path(model_dir)
        config = json.loads((model_dir / "config.json").read_text())
        st_config = json.loads((model_dir / "sentence_bert_config.json").read_text())
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
        if config.get("model_type") != "mpnet":
            raise ValueError(f"{model_dir}/config.json: model_type {config.get('model_type')!r}, expected 'mpnet'")
        if not pooling.get("pooling_mode_mean_tokens"):
            raise ValueError(f"{model_dir}/1_Pooling/config.json: only mean pooling is implemented")
        modules = json.loads((model_dir / "modules.json").read_text())
        self.normalize = any(m["type"].endswith("Normalize") for m in modules)

        self.dtype = dtype
        self.heads = config["num_attention_heads"]
        self.layers = config["num_hidden_layers"]
        self.width = config["hidden_size"]
        self.eps = config["layer_norm_eps"]
        self.padding_idx = config["pad_token_id"]
        self.buckets = config.get("relative_attention_num_buckets", 32)
        self.max_seq_length = st_config["max_seq_length"]

        weights = load_file(str(model_dir / "model.safetensors"))
        self.w = {name: array.astype(dtype) for name, array in weights.items() if array.dtype != np.int64}

        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # tokenizer.json ships with truncation 128 and fixed padding 128; sentence-transformers
        # overrides both with its max_seq_length and per-batch padding.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)

    def token_count(self, text: str) -> int:
        return len(self.tokenizer.encode(text).ids)

    def embed(self, texts: list[str]) -> np.ndarray:
        """One row per text: the sentence embedding (768 floats, unit length)."""
        token_ids = [np.asarray(encoding.ids, dtype=np.int64) for encoding in self.tokenizer.encode_batch(texts)]
        rows: list[np.ndarray] = []
        for group in pack(token_ids, PACKED_TOKENS):
            rows.extend(self._embed_packed(group))
        return np.stack(rows) if rows else np.zeros((0, self.width), self.dtype)

    def _embed_packed(self, sequences: list[np.ndarray]) -> list[np.ndarray]:
        """Embeds several texts in one pass: their tokens are stacked into one matrix for the
        per-token steps (linear layers, LayerNorm, GELU), so the weights are read once per group,
        and attention runs within each text only. No padding, hence no attention mask."""
        lengths = [len(ids) for ids in sequences]
        hidden = self._encode(np.concatenate(sequences), lengths)
        pooled = []
        for segment in np.split(hidden, np.cumsum(lengths)[:-1]):
            # Every token is real, so the masked mean is the plain mean.
            vector = segment.mean(axis=0)
            if self.normalize:
                vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
            pooled.append(vector)
        return pooled

    def _encode(self, ids: np.ndarray, lengths: list[int]) -> np.ndarray:
        w = self.w
        positions = np.concatenate([self._position_ids(segment) for segment in np.split(ids, np.cumsum(lengths)[:-1])])
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][positions]
        x = self._layer_norm(x, "embeddings.LayerNorm")

        biases = {length: self._position_bias(length) for length in set(lengths)}
        for layer in range(self.layers):
            x = self._layer(x, lengths, biases, f"encoder.layer.{layer}.")
        return x

    def _position_ids(self, ids: np.ndarray) -> np.ndarray:
        not_pad = (ids != self.padding_idx).astype(np.int64)
        return np.cumsum(not_pad) * not_pad + self.padding_idx

    def _layer(self, x: np.ndarray, lengths: list[int], biases: dict[int, np.ndarray], prefix: str) -> np.ndarray:
        q = self._linear(x, prefix + "attention.attn.q")
        k = self._linear(x, prefix + "attention.attn.k")
        v = self._linear(x, prefix + "attention.attn.v")
        bounds = np.cumsum([0, *lengths])
        context = np.concatenate(
            [
                self._attention(q[start:end], k[start:end], v[start:end], biases[end - start])
                for start, end in itertools.pairwise(bounds)
            ]
        )
        attended = self._layer_norm(
            self._linear(context, prefix + "attention.attn.o") + x, prefix + "attention.LayerNorm"
        )

        inner = self._linear(attended, prefix + "intermediate.dense")
        inner = inner * self.dtype(0.5) * (self.dtype(1.0) + erf(inner / self.dtype(math.sqrt(2.0))))
        return self._layer_norm(self._linear(inner, prefix + "output.dense") + attended, prefix + "output.LayerNorm")

    def _attention(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray) -> np.ndarray:
        """Multi-head self-attention of one text: (seq, width) projections to (seq, width)."""
        seq, width = q.shape
        head_dim = width // self.heads

        def split_heads(t: np.ndarray) -> np.ndarray:
            return t.reshape(seq, self.heads, head_dim).transpose(1, 0, 2)

        q, k, v = split_heads(q), split_heads(k), split_heads(v)
        scores = q @ k.transpose(0, 2, 1) / self.dtype(math.sqrt(head_dim)) + bias
        scores = scores - scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs = probs / probs.sum(axis=-1, keepdims=True)
        return (probs @ v).transpose(1, 0, 2).reshape(seq, width)

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def _layer_norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        normed = (x - mean) / np.sqrt(variance + self.dtype(self.eps))
        return normed * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _position_bias(self, seq: int) -> np.ndarray:
        """(heads, seq, seq) additive attention bias from the relative-position buckets."""
        positions = np.arange(seq)
        relative = positions[None, :] - positions[:, None]  # key position - query position
        buckets = relative_position_bucket(relative, self.buckets)
        table = self.w["encoder.relative_attention_bias.weight"]  # (buckets, heads)
        return table[buckets].transpose(2, 0, 1)


def relative_position_bucket(relative: np.ndarray, num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """MPNet's bucket of each relative position (transformers' `relative_position_bucket`)."""
    n = -relative
    half = num_buckets // 2
    result = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    max_exact = half // 2
    is_small = n < max_exact
    # Computed in float32 and truncated toward zero, as torch does with `.to(torch.long)`.
    # n >= 1 here keeps log finite; the small positions (n < max_exact) take `n` itself below.
    nonzero = np.maximum(n, 1).astype(np.float32)
    scaled = np.log(nonzero / np.float32(max_exact)) / np.float32(math.log(max_distance / max_exact))
    large = max_exact + (scaled * np.float32(half - max_exact)).astype(np.int64)
    large = np.minimum(large, half - 1)
    return result + np.where(is_small, n, large)


def pack(sequences: list[np.ndarray], budget: int) -> list[list[np.ndarray]]:
    """Consecutive groups of sequences, each of at most `budget` tokens (or one longer sequence)."""
    groups: list[list[np.ndarray]] = []
    used = budget
    for sequence in sequences:
        if used + len(sequence) > budget:
            groups.append([])
            used = 0
        groups[-1].append(sequence)
        used += len(sequence)
    return groups

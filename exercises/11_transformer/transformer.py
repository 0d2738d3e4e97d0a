"""Exercise 11: the encoder-decoder Transformer.

Put together what the earlier exercises built (this folder ships them as
working code): `PositionalEncoding` (07), `Encoder` (09) and `Decoder` (10),
which use the attention layers of 08. Do not edit those files; import them.

Conventions: batch first; boolean masks are True where attention is
BLOCKED; the Encoder and Decoder accept masks of shape (n_q, n_k),
(b, n_q, n_k), (b, 1, n_k) or (b, 1 or h, n_q, n_k).
"""
import math  # noqa: F401  (you will want math.sqrt)

import torch
from torch import nn

from decoder import Decoder  # noqa: F401
from encoder import Encoder  # noqa: F401
from positional_encoding import PositionalEncoding  # noqa: F401


class Transformer(nn.Module):
    """The Transformer of "Attention Is All You Need" (post-norm).

    Sub-modules (these names are checked):
      src_embed     nn.Embedding(src_vocab, d_model)
      tgt_embed     nn.Embedding(tgt_vocab, d_model)
      pos_encoding  PositionalEncoding(d_model, dropout, max_len), used for both sides
      encoder       Encoder(num_encoder_layers, d_model, num_heads, d_ff, dropout)
      decoder       Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout)
      generator     nn.Linear(d_model, tgt_vocab): returns logits, no softmax

    Initialise both embedding tables from N(0, 1/d_model)
    (nn.init.normal_(..., std=d_model ** -0.5)): the sqrt(d_model) factor of
    encode/decode then gives entries of size about 1, like the positional
    encoding's (README.md, "The embedding scale and its init").
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 512, num_heads: int = 8,
                 num_encoder_layers: int = 6, num_decoder_layers: int = 6, d_ff: int = 2048,
                 dropout: float = 0.1, max_len: int = 5000, pad_idx: int = 0):
        super().__init__()
        raise NotImplementedError("Transformer.__init__: see README.md, section 'What to write'")

    def make_src_mask(self, src: torch.Tensor) -> torch.Tensor:
        """A suggested helper (not tested on its own).

        src (b, n_src) token ids -> bool mask (b, 1, n_src), True where
        src == pad_idx. Build it on src's device.
        """
        raise NotImplementedError("Transformer.make_src_mask: see README.md, section 'Masks'")

    def make_tgt_mask(self, tgt: torch.Tensor) -> torch.Tensor:
        """A suggested helper (not tested on its own).

        tgt (b, n_tgt) token ids -> bool mask (b, n_tgt, n_tgt), True above
        the diagonal (future positions) and where tgt == pad_idx. Build it
        with tensor operations on tgt's device, no Python loop.
        """
        raise NotImplementedError("Transformer.make_tgt_mask: see README.md, section 'Masks'")

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """src (b, n_src) token ids -> memory (b, n_src, d_model).

        Embed, multiply by sqrt(d_model), add the positional encoding (once),
        run the encoder with the source padding mask.
        """
        raise NotImplementedError("Transformer.encode: see README.md, section 'What to write'")

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        """tgt (b, n_tgt) token ids, memory (b, n_src, d_model) = encode(src),
        src (b, n_src) the source ids (for its padding mask)
        -> decoder output (b, n_tgt, d_model), before the generator.
        """
        raise NotImplementedError("Transformer.decode: see README.md, section 'What to write'")

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """src (b, n_src), tgt (b, n_tgt) the decoder's input (teacher forcing)
        -> logits (b, n_tgt, tgt_vocab); position t predicts target token t + 1.
        """
        raise NotImplementedError("Transformer.forward: see README.md, section 'What to write'")

    @torch.no_grad()
    def greedy_decode(self, src: torch.Tensor, max_len: int, start_symbol: int, end_symbol: int) -> torch.Tensor:
        """Greedy decoding of src (b, n_src).

        Returns a torch.long tensor (b, max_len) on src's device: column 0 is
        start_symbol; column t is the argmax of the logits at the last
        position of decode(ys[:, :t], ...). Once a row has produced
        end_symbol, the rest of that row is pad_idx. You may stop early when
        every row has ended (the result keeps max_len columns). Does not
        switch modes: the caller calls .eval() first.
        """
        raise NotImplementedError("Transformer.greedy_decode: see README.md, section 'Greedy decoding'")

#: expect: full
#: about: encode/decode loop over self.encoder.layers / self.decoder.layers instead of calling the stacks (same function)
import math

import torch
from torch import nn

from decoder import Decoder
from encoder import Encoder
from positional_encoding import PositionalEncoding


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=512, num_heads=8, num_encoder_layers=6,
                 num_decoder_layers=6, d_ff=2048, dropout=0.1, max_len=5000, pad_idx=0):
        super().__init__()
        self.d_model = d_model
        self.pad_idx = pad_idx
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab)

    def make_src_mask(self, src):
        return (src == self.pad_idx).unsqueeze(1)

    def make_tgt_mask(self, tgt):
        n = tgt.size(1)
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool, device=tgt.device), 1)
        return causal | (tgt == self.pad_idx).unsqueeze(1)

    def encode(self, src):
        x = self.pos_encoding(self.src_embed(src) * math.sqrt(self.d_model))
        mask = self.make_src_mask(src)
        for layer in self.encoder.layers:
            x = layer(x, mask)
        return x

    def decode(self, tgt, memory, src):
        x = self.pos_encoding(self.tgt_embed(tgt) * math.sqrt(self.d_model))
        tgt_mask, memory_mask = self.make_tgt_mask(tgt), self.make_src_mask(src)
        for layer in self.decoder.layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return x

    def forward(self, src, tgt):
        return self.generator(self.decode(tgt, self.encode(src), src))

    @torch.no_grad()
    def greedy_decode(self, src, max_len, start_symbol, end_symbol):
        memory = self.encode(src)
        ys = torch.full((src.size(0), max_len), self.pad_idx, dtype=torch.long, device=src.device)
        ys[:, 0] = start_symbol
        finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        for t in range(1, max_len):
            nxt = self.generator(self.decode(ys[:, :t], memory, src))[:, -1].argmax(-1)
            ys[:, t] = nxt.masked_fill(finished, self.pad_idx)
            finished |= nxt == end_symbol
            if finished.all():
                break
        return ys
